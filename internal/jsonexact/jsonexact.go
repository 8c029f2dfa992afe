// Package jsonexact finds the integers of a JSON text that canonical JSON
// (RFC 8785, JCS) would write as another number: JCS writes every number
// as an IEEE double, so an integer beyond ±2^53 comes out changed. The
// ledger refuses such a payload (its fingerprint would be of another
// number); the Idempotency-Key proxy asks the same question before it
// sends a body as JSON, so both use this one rule.
package jsonexact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"strings"

	"github.com/gowebpki/jcs"
)

// exactDigits is the most digits an integer can have and still be below
// 2^53 (9007199254740992 has 16).
const exactDigits = 15

// Inexact returns the first integer of the JSON text that canonical JSON
// would write as another number, and whether there is one. A text with no
// run of more than 15 digits is answered without decoding it. Syntax
// errors are not its business (JCS reports them): it answers false.
func Inexact(text []byte) (json.Number, bool) {
	run, long := 0, false
	for _, c := range text {
		if c >= '0' && c <= '9' {
			if run++; run > exactDigits {
				long = true
				break
			}
		} else {
			run = 0
		}
	}
	if !long {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return "", false
		}
		n, ok := tok.(json.Number)
		if !ok || strings.ContainsAny(string(n), ".eE") {
			continue
		}
		i, ok := new(big.Int).SetString(string(n), 10)
		if !ok {
			continue
		}
		if _, acc := new(big.Float).SetInt(i).Float64(); acc != big.Exact || !writtenAsItself(n, i) {
			return n, true
		}
	}
}

// writtenAsItself says whether JCS writes n as the integer i.
func writtenAsItself(n json.Number, i *big.Int) bool {
	c, err := jcs.Transform([]byte(n))
	if err != nil {
		return false
	}
	r, ok := new(big.Rat).SetString(string(c))
	return ok && r.IsInt() && r.Num().Cmp(i) == 0
}
