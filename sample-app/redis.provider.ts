import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';

export const REDIS = Symbol('REDIS');

/** The application's own Redis client: the lock module uses it but never closes it. */
export const redisProvider = {
  provide: REDIS,
  useFactory: () => new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
};

@Injectable()
export class RedisCloser implements OnApplicationShutdown {
  constructor(@Inject(REDIS) private readonly redis: Redis) {}

  async onApplicationShutdown(): Promise<void> {
    await this.redis.quit();
  }
}
