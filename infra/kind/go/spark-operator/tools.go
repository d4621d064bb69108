//go:build tools

// Package tools pins the kubeflow Spark operator (controller and webhook in one binary), the same version
// as the chart spark-operator/install.sh installs.
package tools

import _ "github.com/kubeflow/spark-operator/v2/cmd/operator"
