module github.com/rivetkv/rivet/compat/importswap

go 1.26.0
