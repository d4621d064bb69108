//go:build tools

// Package tools pins Traefik, the ingress controller of the offline kind cluster (it proxies WebSockets with
// no extra configuration). The module zip lacks the web UI's built assets that webui/ embeds, so
// build-binaries.sh builds from a copy of the module with an empty UI, which go.mod's last replace names.
package tools

import _ "github.com/traefik/traefik/v3/cmd/traefik"
