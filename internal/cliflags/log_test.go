package cliflags_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/podfence/podfence/internal/cliflags"
)

// TestLogFlags: the defaults, both formats, the level, and the environment form.
func TestLogFlags(t *testing.T) {
	var l cliflags.Log
	fs := pflag.NewFlagSet("cmd", pflag.ContinueOnError)
	l.AddFlags(fs)
	if l.Level != "info" || l.Format != "text" {
		t.Errorf("defaults %+v, want info and text", l)
	}
	if err := fs.Parse([]string{"--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PODFENCE_LOG_LEVEL": "warn"}
	if err := cliflags.FromEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log, err := l.Logger(&out)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", "v")
	if got := out.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `"level":"WARN","msg":"shown","k":"v"}`) {
		t.Errorf("json log at warn: %q", got)
	}
	out.Reset()
	log, err = cliflags.Log{Level: "debug", Format: "text"}.Logger(&out)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("seen")
	if got := out.String(); !strings.Contains(got, "level=DEBUG msg=seen") {
		t.Errorf("text log at debug: %q", got)
	}
}

// TestLogFlagsRefuse: a bad value names the flag, the value and what is allowed.
func TestLogFlagsRefuse(t *testing.T) {
	for _, tc := range []struct {
		log  cliflags.Log
		want string
	}{
		{cliflags.Log{Level: "loud", Format: "text"}, `flag --log-level "loud": want debug, info, warn or error`},
		{cliflags.Log{Level: "", Format: "json"}, `flag --log-level "": want debug, info, warn or error`},
		{cliflags.Log{Level: "info", Format: "xml"}, `flag --log-format "xml": want text or json`},
		{cliflags.Log{Level: "info", Format: ""}, `flag --log-format "": want text or json`},
	} {
		if log, err := tc.log.Logger(&bytes.Buffer{}); log != nil || err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, %v; want %s", tc.log, log, err, tc.want)
		}
	}
}
