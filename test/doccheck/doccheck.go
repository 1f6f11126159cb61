// Package doccheck checks the project's Markdown: every relative link resolves (the file
// exists and, for a link with an #anchor into a Markdown file, a heading with that
// GitHub-style anchor exists there), no line of a reference page is over MaxLine characters,
// the reading guide names every package under extender/, and docs/configuration.md lists
// every configuration key with its default. Its test runs in `make unit` and `make lint`.
package doccheck

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// MaxLine is the longest line, in characters, a reference page may have.
const MaxLine = 200

// Link is one link or image destination found in a Markdown file.
type Link struct {
	Line int    // 1-based line of the link's text in the file
	Dest string // the destination as written, e.g. "../docs/x.md#a-heading"
}

// Page is what the check needs of one Markdown file: its links and its heading anchors.
type Page struct {
	Links   []Link
	Anchors map[string]bool
}

var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// Parse reads a Markdown file the way GitHub renders it (CommonMark with GFM's tables and
// autolinks): links in code spans and code blocks are not links, and headings get GitHub's
// anchors, duplicates numbered -1, -2, ...
func Parse(src []byte) Page {
	p := Page{Anchors: map[string]bool{}}
	seen := map[string]int{}
	doc := markdown.Parser().Parse(text.NewReader(src))
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			slug := Slug(plainText(n, src))
			if k := seen[slug]; k > 0 {
				p.Anchors[slug+"-"+strconv.Itoa(k)] = true
			} else {
				p.Anchors[slug] = true
			}
			seen[slug]++
		case *ast.Link:
			p.Links = append(p.Links, Link{Line: lineOf(n, src), Dest: string(n.Destination)})
		case *ast.Image:
			p.Links = append(p.Links, Link{Line: lineOf(n, src), Dest: string(n.Destination)})
		}
		return ast.WalkContinue, nil
	})
	return p
}

// plainText is a heading's text as GitHub takes it for the anchor: the text of its inline
// children, code spans included, without markup.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Value(src))
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// lineOf is the line of the first text inside an inline node, else of its block.
func lineOf(n ast.Node, src []byte) int {
	off := -1
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering {
			off = t.Segment.Start
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	for b := n; off < 0 && b != nil; b = b.Parent() {
		if b.Type() == ast.TypeBlock && b.Lines().Len() > 0 {
			off = b.Lines().At(0).Start
		}
	}
	if off < 0 {
		return 0
	}
	return bytes.Count(src[:off], []byte("\n")) + 1
}

// Slug is GitHub's anchor for a heading's text: lower case, every space a hyphen, and only
// letters, digits, marks, hyphens and connector punctuation (the underscore) kept.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// Relative splits a link destination into the path and the anchor it names inside the
// repository; ok is false for a link elsewhere (a scheme such as https: or mailto:, or //host).
// A destination that is only "#anchor" has an empty path: the page itself.
func Relative(dest string) (path, anchor string, ok bool) {
	u, err := url.Parse(dest)
	if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(dest, "//") {
		return "", "", false
	}
	return u.Path, u.Fragment, true
}

// LongLines lists the lines of src over max characters (runes, not bytes), as
// "line N: M characters".
func LongLines(src []byte, max int) []string {
	var out []string
	for i, line := range bytes.Split(src, []byte("\n")) {
		if n := utf8.RuneCount(bytes.TrimRight(line, "\r")); n > max {
			out = append(out, fmt.Sprintf("line %d: %d characters", i+1, n))
		}
	}
	return out
}
