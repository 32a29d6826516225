module github.com/rivetkv/rivet/bench

go 1.26.0

require (
	github.com/rivetkv/rivet v0.0.0
	go.etcd.io/bbolt v1.5.0
)

require golang.org/x/sys v0.49.0 // indirect

