package schemas

import "testing"

// BenchmarkCompileJobSpec measures what validate pays once per process
// for the job-spec schema: parsing the embedded document, checking it
// against the 2020-12 metaschema and compiling it.
func BenchmarkCompileJobSpec(b *testing.B) {
	for b.Loop() {
		if _, err := compileEmbedded("job-spec", jobSpecURL, jobSpecSchema); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDefaultProfile measures loading the built-in profile, which
// every command that reads a spec does once.
func BenchmarkDefaultProfile(b *testing.B) {
	for b.Loop() {
		if _, err := DefaultProfile(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseProfile is DefaultProfile with the profile schema checked,
// as for a profile file (the schema is compiled once, before the loop).
func BenchmarkParseProfile(b *testing.B) {
	if _, err := compiledProfile(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ParseProfile("(built-in)", defaultProfile); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileProfile measures compiling the profile schema, which
// only a profile file needs.
func BenchmarkCompileProfile(b *testing.B) {
	for b.Loop() {
		if _, err := compileEmbedded("profile", profileURL, profileSchema); err != nil {
			b.Fatal(err)
		}
	}
}
