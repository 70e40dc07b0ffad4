/**
 * Give `to` everything other decorators recorded on `from`: every reflect-metadata key and own
 * property, and the name. Without it, a lock decorator placed above `@Cron` or `@Get` hides
 * their metadata and silently un-schedules or un-routes the method.
 */
export function copyMethodMetadata(from: Function, to: Function): void {
  for (const key of Reflect.getMetadataKeys(from)) {
    if (!Reflect.hasOwnMetadata(key, to)) Reflect.defineMetadata(key, Reflect.getMetadata(key, from), to);
  }
  for (const key of Reflect.ownKeys(from)) {
    if (key === 'length' || key === 'name' || key === 'prototype' || key === 'arguments' || key === 'caller') continue;
    const descriptor = Object.getOwnPropertyDescriptor(from, key);
    if (descriptor && !Object.prototype.hasOwnProperty.call(to, key)) Object.defineProperty(to, key, descriptor);
  }
  Object.defineProperty(to, 'name', { value: from.name, configurable: true });
}
