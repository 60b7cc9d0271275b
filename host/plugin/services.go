package plugin

import "github.com/compact-host/compact-host/host/internal/pluginapi"

// Services is what the host offers a plugin during one call: a model
// completion and token counting. The engine passes its own Services with
// every call, so a plugin loaded once serves engines with different models.
// Implementations must be safe for concurrent use.
//
// It is the same type as host.Services, so a *Plugin is a host.Strategy
// and a host.Truncator without package host importing this one.
type Services = pluginapi.Services
