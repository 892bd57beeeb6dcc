// Package layout holds no code: its test keeps the project's import rules
// and sizes (which package may import which, a package root of at most
// 4,000 non-test lines, a file of at most 800), so that the next feature
// finds a room of its own instead of a drawer. The rules are a table in
// layout_test.go; an edge outside it fails CI, naming the edge and the
// rule.
package layout
