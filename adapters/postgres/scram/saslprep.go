// SASLprep of a password, as the server applies it before SCRAM.

package scram

//go:generate python3 gen_saslprep.py

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// saslprep prepares a password the way PostgreSQL does before it derives a SCRAM verifier
// (src/common/saslprep.c, RFC 4013): pure ASCII as it is; otherwise non-ASCII spaces mapped to
// a space, characters "commonly mapped to nothing" removed, NFKC. Where the input is not UTF-8,
// or the result is empty, prohibited, unassigned in Unicode 3.2 or breaks the bidi rule,
// PostgreSQL uses the raw bytes, and so does this.
func saslprep(password string) string {
	if isASCII(password) || !utf8.ValidString(password) {
		return password
	}
	var mapped strings.Builder
	for _, r := range password {
		switch {
		case unicode.Is(nonASCIISpace, r):
			mapped.WriteByte(' ')
		case unicode.Is(mappedToNothing, r):
		default:
			mapped.WriteRune(r)
		}
	}
	if mapped.Len() == 0 {
		return password
	}
	prepared := norm.NFKC.String(mapped.String())
	hasRandAL, hasL := false, false
	for _, r := range prepared {
		if unicode.Is(prohibited, r) || unicode.Is(unassigned, r) {
			return password
		}
		hasRandAL = hasRandAL || unicode.Is(randAL, r)
		hasL = hasL || unicode.Is(leftToRight, r)
	}
	if hasRandAL {
		first, _ := utf8.DecodeRuneInString(prepared)
		last, _ := utf8.DecodeLastRuneInString(prepared)
		if hasL || !unicode.Is(randAL, first) || !unicode.Is(randAL, last) {
			return password
		}
	}
	return prepared
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
