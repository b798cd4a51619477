package cliflags

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"
)

// Log is the --log-level and --log-format of a command. Add them with AddFlags; build the
// logger with Logger once the flags (and FromEnv) are parsed.
type Log struct {
	Level  string // debug, info, warn or error
	Format string // text or json
}

// AddFlags adds --log-level (default info) and --log-format (default text) to fs.
func (l *Log) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&l.Level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.Format, "log-format", "text", "log format: text or json")
}

// Logger returns the logger the flags ask for, writing to w. A bad value is refused with
// an error naming the flag, the value and what is allowed.
func (l Log) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, fmt.Errorf("flag --log-level %q: want debug, info, warn or error", l.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.Format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("flag --log-format %q: want text or json", l.Format)
}
