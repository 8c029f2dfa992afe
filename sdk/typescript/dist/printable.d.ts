/** The Unicode version of the table: Go's unicode.Version. */
export declare const PRINTABLE_UNICODE_VERSION = "15.0.0";
/**
 * The code points Go's unicode.IsPrint accepts (categories L, M, N, P, S and
 * U+0020), as inclusive ranges: start0, end0, start1, end1, ... in order.
 */
export declare const PRINTABLE_RANGES: readonly number[];
