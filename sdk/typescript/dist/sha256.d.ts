/** sha256 returns the SHA-256 digest of data. */
export declare function sha256(data: Uint8Array): Uint8Array;
/** hex renders bytes as lowercase hexadecimal. */
export declare function hex(bytes: Uint8Array): string;
