module github.com/rivetkv/rivet/compat/bboltsuite

go 1.26.0

require (
	github.com/rivetkv/rivet v0.0.0
	github.com/stretchr/testify v1.12.1
	golang.org/x/sync v0.25.0
	golang.org/x/sys v0.49.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect

replace github.com/rivetkv/rivet => ../..
