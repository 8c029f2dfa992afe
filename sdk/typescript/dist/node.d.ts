import type { Sender } from "./transport.js";
/** Whether this is Node itself: Bun and Deno (and Workers' compatibility layers) say node too, but their fetch is native. */
export declare function onNode(): boolean;
/** nodeSender returns a Sender over node:net/node:tls, or rejects when they cannot be loaded (then use fetch). */
export declare function nodeSender(): Promise<Sender>;
