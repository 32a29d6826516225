package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// libraryPath is the rivet library's module path, looked up in the build
// information to report which library the tool was built with.
const libraryPath = "github.com/rivetkv/rivet"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the versions of the tool, the rivet library and Go it was built with",
		Long: `Prints the tool's version, the version of the rivet library it was built
with, the Go version and platform, and the engines "rivet bench" can run.`,
		Example: `  rivet version`,
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			tool, lib := "(devel)", "(unknown)"
			if bi, ok := debug.ReadBuildInfo(); ok {
				if bi.Main.Version != "" {
					tool = bi.Main.Version
				}
				for _, d := range bi.Deps {
					if d.Path == libraryPath {
						lib = moduleVersion(d)
					}
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "rivet %s\n", tool)
			fmt.Fprintf(out, "library %s %s\n", libraryPath, lib)
			fmt.Fprintf(out, "go %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			fmt.Fprintf(out, "bench engines %s\n", benchEngines())
		},
	}
}

// moduleVersion names a dependency's version, or its replacement when the
// build used one (as every build from a checkout does).
func moduleVersion(m *debug.Module) string {
	if m.Replace != nil {
		if m.Replace.Version != "" {
			return m.Replace.Path + " " + m.Replace.Version
		}
		return "(replaced by " + m.Replace.Path + ")"
	}
	return m.Version
}
