module github.com/rivetkv/rivet

go 1.23

require golang.org/x/sys v0.49.0
