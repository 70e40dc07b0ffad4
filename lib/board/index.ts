/**
 * `nest-distributed-lock/board`: an operator's page of the locks held now, and its JSON API.
 */
export { DistributedLockBoardModule } from './board.module.js';
export type { DistributedLockBoardOptions } from './board-options.js';
export type { BoardBackend, BoardLock, BoardView } from './board-view.js';
