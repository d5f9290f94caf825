package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The chart's default image is the one the release workflow pushes, and the
// workflow runs on the tags that version.sh reads, so `helm install` with the
// chart's defaults pulls an image that a release publishes (not one that
// nothing in the repository makes).
func TestReleaseWorkflowPublishesTheChartsImage(t *testing.T) {
	root := filepath.Join("..", "..")
	var workflow struct {
		On struct {
			Push struct {
				Tags []string `yaml:"tags"`
			} `yaml:"push"`
		} `yaml:"on"`
		Env  map[string]string `yaml:"env"`
		Jobs map[string]struct {
			Steps []struct {
				Name string `yaml:"name"`
				Run  string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	readYAML(t, filepath.Join(root, ".github", "workflows", "release.yml"), &workflow)
	var values struct {
		Image struct {
			Repository string `yaml:"repository"`
			Tag        string `yaml:"tag"`
		} `yaml:"image"`
	}
	readYAML(t, filepath.Join(root, "deploy", "helm", "gpuwatch", "values.yaml"), &values)

	// The repository's owner is gpuwatch (github.com/gpuwatch/gpuwatch).
	image := strings.ReplaceAll(workflow.Env["IMAGE"], "${{ github.repository_owner }}", "gpuwatch")
	if image != values.Image.Repository {
		t.Errorf("the workflow pushes %q, the chart pulls %q", image, values.Image.Repository)
	}
	if values.Image.Tag != "" {
		t.Errorf("the chart pins tag %q; empty means the chart's appVersion, which the workflow checks against the tag", values.Image.Tag)
	}
	if len(workflow.On.Push.Tags) == 0 || !strings.HasPrefix(workflow.On.Push.Tags[0], "v") {
		t.Errorf("the workflow does not run on v* tags: %v", workflow.On.Push.Tags)
	}
	var steps []string
	for _, job := range workflow.Jobs {
		for _, s := range job.Steps {
			steps = append(steps, s.Run)
		}
	}
	all := strings.Join(steps, "\n")
	for _, want := range []string{"make release image", `docker://$IMAGE:$VERSION`, `push "dist/gpuwatch-$VERSION.tgz"`, "gh release create", "appVersion"} {
		if !strings.Contains(all, want) {
			t.Errorf("no step runs %q", want)
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
