module go.etcd.io/bbolt

go 1.26.0

require github.com/rivetkv/rivet v0.0.0

require golang.org/x/sys v0.49.0 // indirect

replace github.com/rivetkv/rivet => ../..
