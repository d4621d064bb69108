//go:build tools

// Package tools pins skaffold (the newest release the Go module proxy serves here). `go install pkg@version`
// refuses modules with replace directives, so this module carries skaffold's own replaces.
package tools

import _ "github.com/GoogleContainerTools/skaffold/v2/cmd/skaffold"
