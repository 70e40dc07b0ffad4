import type { LockLossListener } from './lock-backend.interface.js';

type Reason = Parameters<LockLossListener>[2];

/** The engines a backend tells of leases it knows are gone (`LockBackend.onLeaseLost`). */
export class LossListeners {
  private readonly listeners: LockLossListener[] = [];

  /** Add one; the returned function removes it. */
  add(listener: LockLossListener): () => void {
    this.listeners.push(listener);
    return () => {
      const index = this.listeners.indexOf(listener);
      if (index >= 0) this.listeners.splice(index, 1);
    };
  }

  /** Tell every listener (a listener that removes itself meanwhile still hears this one). */
  tell(owner: string, detail: string, reason?: Reason): void {
    for (const listener of [...this.listeners]) listener(owner, detail, reason);
  }
}
