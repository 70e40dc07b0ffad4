import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

async function bootstrap(): Promise<void> {
  // The lock board's demo password: made up when none is given, and printed below.
  process.env.BOARD_TOKEN ||= randomBytes(9).toString('base64url');
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  // Locks still held at shutdown are released, so a stopped replica leaves no key behind.
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
  const address = app.getHttpServer().address();
  // The demo script reads this line to find the port.
  const port = typeof address === 'object' && address ? address.port : process.env.PORT;
  console.log(`LISTENING ${port}`);
  console.log(`Lock board: http://127.0.0.1:${port}/locks (user ops, password ${process.env.BOARD_TOKEN})`);
}

void bootstrap();
