/** sleep resolves after ms, or rejects with signal's reason when it aborts first. */
export declare function sleep(ms: number, signal?: AbortSignal): Promise<void>;
/**
 * A controller aborted when any of the given signals aborts (with its
 * reason) or after timeoutMs (with a TimeoutError DOMException). Call
 * dispose() when done, so no listener or timer outlives the call.
 * (AbortSignal.any is Node 20.3+, so it is not relied on.)
 */
export interface Linked {
    signal: AbortSignal;
    /** Whether the timeout (not a parent signal) fired. */
    timedOut(): boolean;
    abort(reason?: unknown): void;
    dispose(): void;
}
export declare function linkSignals(parents: (AbortSignal | undefined)[], timeoutMs?: number): Linked;
/** timeoutError is the TimeoutError DOMException (an Error where there is none) of a wait that ran out. */
export declare function timeoutError(ms: number): Error;
/**
 * encodeJSON turns a payload or result into JSON text, refusing what would
 * not survive the trip or would silently change: undefined, a function or a
 * symbol as the value itself, a BigInt, a cycle, a number that is not
 * finite (JSON.stringify writes null) or an integer beyond ±(2^53-1)
 * anywhere (the ledger refuses those: send such IDs as strings). Nested
 * undefined properties are dropped, as JSON.stringify does. It throws a
 * BadRequestError naming what (field).
 */
export declare function encodeJSON(value: unknown, field: string): string;
/** randomHex returns n random bytes as hex (crypto.getRandomValues when the runtime has it). */
export declare function randomHex(n: number): string;
/**
 * newOwner returns a fresh owner name, "prefix/instance/random": unique to
 * one execution attempt, as the ledger requires. instance is random per
 * load of the SDK (the core cannot read a host name or pid; pass
 * ownerPrefix, e.g. `${os.hostname()}/${process.pid}`, to see them).
 */
export declare function newOwner(prefix?: string): string;
/** errorMessage renders anything thrown as a message. */
export declare function errorMessage(err: unknown): string;
