// Trimmed by cutenative: upstream v0.7.0 also requires golang.org/x/tools, x/mod and
// x/sys, for its generators only, none of which the vendored packages import.
module golang.org/x/text

go 1.17
