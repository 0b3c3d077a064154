package logger_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/logger"
	"github.com/novox/postgres-provider/ports"
)

func TestTextIsTheSeedsLine(t *testing.T) {
	is := is.New(t)
	l, out := loggerOf(t, logger.Text, slog.LevelInfo)
	l.Log(ports.Entry{Level: slog.LevelWarn, Consumer: "letta", Message: "letta: the backend no longer holds it; applying again"})
	is.Equal(out.String(), "[provisioner:postgres] letta: the backend no longer holds it; applying again\n") // prefix, message, newline
}

func TestJSONCarriesTheConsumer(t *testing.T) {
	is := is.New(t)
	l, out := loggerOf(t, logger.JSON, slog.LevelInfo)
	l.Log(ports.Entry{Level: slog.LevelWarn, Consumer: "letta", Message: "letta: create failed, will retry: x"})
	l.Log(ports.Entry{Level: slog.LevelInfo, Message: "contributions file readable again"})
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	is.Equal(len(lines), 2) // one JSON line per entry
	var first, second map[string]any
	is.NoErr(json.Unmarshal(lines[0], &first))
	is.NoErr(json.Unmarshal(lines[1], &second))
	is.Equal(first["msg"], "letta: create failed, will retry: x") // the same words as the text line
	is.Equal(first["consumer"], "letta")                          // the consumer as a field
	is.Equal(first["resource"], "postgres")
	is.Equal(first["level"], "WARN")
	_, has := second["consumer"]
	is.True(!has) // a line about no consumer has no consumer field
}

func TestJSONCarriesTheAuditEvent(t *testing.T) {
	is := is.New(t)
	l, out := loggerOf(t, logger.JSON, slog.LevelInfo)
	l.Log(ports.Entry{Level: slog.LevelInfo, Consumer: "letta", Message: "letta: adopted", Event: "adopted"})
	var line map[string]any
	is.NoErr(json.Unmarshal(out.Bytes(), &line))
	is.Equal(line["event"], "adopted") // what the audit line records, as a field to filter on
	is.Equal(line["msg"], "letta: adopted")
}

func TestUnknownFormatIsRefused(t *testing.T) {
	is := is.New(t)
	_, err := logger.New(&bytes.Buffer{}, "xml", "postgres", slog.LevelInfo)
	is.True(err != nil) // refused
	is.Equal(err.Error(), `log format "xml": want text or json`)
}

func TestLinesQuieterThanTheLevelAreNotSaid(t *testing.T) {
	is := is.New(t)
	for _, format := range []string{logger.Text, logger.JSON} {
		l, out := loggerOf(t, format, slog.LevelWarn)
		l.Log(ports.Entry{Level: slog.LevelInfo, Message: "contributions file readable again"})
		l.Log(ports.Entry{Level: slog.LevelWarn, Message: "letta: create failed, will retry: x"})
		is.Equal(bytes.Count(out.Bytes(), []byte("\n")), 1) // only the warning
	}
}

// hostile is the login of issue 19: one that, written raw, would add a line that reads like
// the provider's own.
const hostile = "evil\n[provisioner:postgres] h0001: no longer in /run/mesh/contributions.json; withdrawing it from the backend"

func TestALineFromOutsideStaysOneLine(t *testing.T) {
	is := is.New(t)
	l, out := loggerOf(t, logger.Text, slog.LevelInfo)
	path := "/run/secrets/a\nb\x1b[2Jc"
	l.Log(ports.Entry{Level: slog.LevelWarn, Consumer: hostile, Message: hostile + ": create failed, will retry: login is bad"})
	l.Log(ports.Entry{Level: slog.LevelInfo, Consumer: "letta", Message: "letta: secret not readable yet (" + path + "): it is empty"})
	is.Equal(out.String(), `[provisioner:postgres] evil\n[provisioner:postgres] h0001: no longer in /run/mesh/contributions.json; withdrawing it from the backend: create failed, will retry: login is bad
[provisioner:postgres] letta: secret not readable yet (/run/secrets/a\nb\x1b[2Jc): it is empty
`) // two entries, two lines, no raw newline or ESC inside either
	is.Equal(bytes.IndexByte(out.Bytes(), 0x1b), -1) // no escape byte reaches the terminal
}

func TestEscapeLeavesOrdinaryTextAsItIs(t *testing.T) {
	is := is.New(t)
	for _, s := range []string{"", "letta: still not held after being applied again (2 times in a row) — create does not produce what holds checks",
		`login "a\\b": only letters`, "café ü 日本"} {
		is.Equal(logger.Escape(s), s) // printable text, UTF-8 included, is unchanged
	}
	is.Equal(logger.Escape("a\tb\r\x00\x7f\u009b\u202e\xff"), `a\tb\r\x00\x7f\u009b\u202e\xff`) // each control, override and stray byte escaped
}

func TestJSONIsLeftToTheEncoder(t *testing.T) {
	is := is.New(t)
	l, out := loggerOf(t, logger.JSON, slog.LevelInfo)
	l.Log(ports.Entry{Level: slog.LevelWarn, Consumer: hostile, Message: hostile + ": x"})
	is.Equal(bytes.Count(out.Bytes(), []byte("\n")), 1) // one JSON line
	var got map[string]any
	is.NoErr(json.Unmarshal(out.Bytes(), &got))
	is.Equal(got["consumer"], hostile)  // the login as it is, escaped by JSON alone
	is.Equal(got["msg"], hostile+": x") // and the message
}

// The end of a fact a backend told (ports.Once without a line) writes nothing, in either
// format, where it reaches a Logger without the loop's domain.Told before it; the fact itself
// is written as any line.
func TestTheEndOfAFactWritesNothing(t *testing.T) {
	is := is.New(t)
	for _, format := range []string{logger.Text, logger.JSON} {
		l, out := loggerOf(t, format, slog.LevelInfo)
		once := &ports.Once{About: "extension skipped", Subject: "vector"}
		l.Log(ports.Entry{Level: slog.LevelWarn, Consumer: "letta", Once: once})
		is.Equal(out.Len(), 0) // nothing for its end
		l.Log(ports.Entry{Level: slog.LevelWarn, Consumer: "letta", Message: "letta: extension vector is not available", Once: once})
		is.True(bytes.Contains(out.Bytes(), []byte("letta: extension vector is not available"))) // the fact is a line
	}
}

// loggerOf is a logger of format at level, for the resource postgres, and what it writes.
func loggerOf(t *testing.T, format string, level slog.Level) (ports.Logger, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	l, err := logger.New(&out, format, "postgres", level)
	if err != nil {
		t.Fatal(err)
	}
	return l, &out
}
