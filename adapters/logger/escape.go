package logger

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape is s made safe for a line of text or a terminal: every control character (a newline,
// a carriage return, ESC and the rest of C0 and C1, DEL), every other rune a terminal does not
// print (a bidirectional override, a line separator) and every byte that is not UTF-8 is
// written as strconv.Quote writes it (\n, \x1b, \u202e), so that what comes from outside (a
// login, a path, an error's text) can neither end a line nor steer a terminal. A string with
// none of them, as nearly every line is, is answered as it is.
func Escape(s string) string {
	i := unsafeAt(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&15])
		case safe(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// unsafeAt is the index of the first byte of s that Escape rewrites, or -1.
func unsafeAt(s string) int {
	for i, r := range s {
		if r < utf8.RuneSelf {
			if r < ' ' || r == 0x7f {
				return i
			}
			continue
		}
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
		if !safe(r) {
			return i
		}
	}
	return -1
}

// safe is whether r, a valid rune, is written as it is: printable, or a plain space.
func safe(r rune) bool { return r == ' ' || strconv.IsPrint(r) }

const hexDigits = "0123456789abcdef"
