import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  // Locks still held at shutdown are released, so a stopped replica leaves no key behind.
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
  const address = app.getHttpServer().address();
  // The demo script reads this line to find the port.
  console.log(`LISTENING ${typeof address === 'object' && address ? address.port : process.env.PORT}`);
}

void bootstrap();
