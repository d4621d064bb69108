//go:build tools

// Package tools pins toxiproxy (the fault proxy `sparkwire chaos` puts on every network link) so that
// infra/setup.sh builds toxiproxy-server from the Go module proxy with checked sums.
package tools

import (
	_ "github.com/Shopify/toxiproxy/v2/cmd/server"
)
