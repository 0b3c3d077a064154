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
	var out bytes.Buffer
	l, err := logger.New(&out, logger.Text, "postgres", slog.LevelInfo)
	is.NoErr(err)
	l.Log(ports.Entry{Level: slog.LevelWarn, Consumer: "letta", Message: "letta: the backend no longer holds it; applying again"})
	is.Equal(out.String(), "[provisioner:postgres] letta: the backend no longer holds it; applying again\n") // prefix, message, newline
}

func TestJSONCarriesTheConsumer(t *testing.T) {
	is := is.New(t)
	var out bytes.Buffer
	l, err := logger.New(&out, logger.JSON, "postgres", slog.LevelInfo)
	is.NoErr(err)
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

func TestUnknownFormatIsRefused(t *testing.T) {
	is := is.New(t)
	_, err := logger.New(&bytes.Buffer{}, "xml", "postgres", slog.LevelInfo)
	is.True(err != nil) // refused
	is.Equal(err.Error(), `log format "xml": want text or json`)
}

func TestLinesQuieterThanTheLevelAreNotSaid(t *testing.T) {
	is := is.New(t)
	for _, format := range []string{logger.Text, logger.JSON} {
		var out bytes.Buffer
		l, err := logger.New(&out, format, "postgres", slog.LevelWarn)
		is.NoErr(err)
		l.Log(ports.Entry{Level: slog.LevelInfo, Message: "contributions file readable again"})
		l.Log(ports.Entry{Level: slog.LevelWarn, Message: "letta: create failed, will retry: x"})
		is.Equal(bytes.Count(out.Bytes(), []byte("\n")), 1) // only the warning
	}
}
