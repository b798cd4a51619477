package nriplugin

import (
	"context"
	"fmt"
	"log/slog"

	nrilog "github.com/containerd/nri/pkg/log"
)

// stubLogger sends the NRI stub's own messages to the agent's logger, at Debug for its
// chatty Info lines ("Registering plugin…"), so that the agent's Info lines stay one per fact.
type stubLogger struct{ log *slog.Logger }

var _ nrilog.Logger = stubLogger{}

func (l stubLogger) Debugf(ctx context.Context, format string, args ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, args...), "source", "nri-stub")
}

func (l stubLogger) Infof(ctx context.Context, format string, args ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, args...), "source", "nri-stub")
}

func (l stubLogger) Warnf(ctx context.Context, format string, args ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, args...), "source", "nri-stub")
}

func (l stubLogger) Errorf(ctx context.Context, format string, args ...any) {
	l.log.ErrorContext(ctx, fmt.Sprintf(format, args...), "source", "nri-stub")
}
