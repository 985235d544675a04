module github.com/cutenative/cutenative/go

go 1.22

require golang.org/x/image v0.5.0

require golang.org/x/text v0.7.0 // indirect

// golang.org/x/image (the Go Regular font and its rasterizer, for cmd/cutenative-demo's chart) and
// golang.org/x/text (charmap, which x/image/font/sfnt imports) are vendored: only the packages listed
// in vendor/modules.txt, copied from Debian's golang-golang-x-image-dev 0.5.0 and golang-golang-x-text-dev
// 0.7.0, with their LICENSE and PATENTS. The vendored trees double as directory replacements (each
// with its go.mod), so that both -mod=vendor (Go's default here) and scripts/go.sh's -mod=mod build
// offline with GOPROXY=off. Do not run `go mod vendor` against these paths (it deletes vendor/ before
// copying from it); to update, point the replacements at fresh sources elsewhere, run `go mod vendor`,
// add the two go.mod files back and restore the ./vendor paths here and in vendor/modules.txt.
replace (
	golang.org/x/image => ./vendor/golang.org/x/image
	golang.org/x/text => ./vendor/golang.org/x/text
)
