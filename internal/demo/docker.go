//go:build cgo

package demo

import (
	"encoding/json"
	"net/http"
	"strings"
)

// dockerContainer is what GET /containers/{id}/json answers (the fields the
// Docker Engine API has in every version).
type dockerContainer struct {
	ID     string `json:"Id"`
	Name   string `json:"Name"`
	Config struct {
		Image  string            `json:"Image"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

// DockerAPI answers the Docker Engine API's container inspect and list,
// versioned (/v1.41/containers/ID/json) or not, for the containers it holds.
type DockerAPI struct {
	containers map[string]dockerContainer
}

// NewDockerAPI holds one container per Docker Compose workload, with the
// labels Compose puts on it.
func NewDockerAPI(workloads []Workload) *DockerAPI {
	api := &DockerAPI{containers: map[string]dockerContainer{}}
	for _, w := range workloads {
		if w.Kind != KindCompose {
			continue
		}
		c := dockerContainer{ID: w.ContainerID, Name: "/" + w.ContainerName}
		c.Config.Image = w.Image
		c.Config.Labels = map[string]string{
			"com.docker.compose.project":          w.ComposeProject,
			"com.docker.compose.service":          w.ComposeService,
			"com.docker.compose.container-number": "1",
		}
		api.containers[w.ContainerID] = c
	}
	return api
}

func (d *DockerAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, "/v"); ok {
		if _, after, found := strings.Cut(rest, "/"); found {
			path = "/" + after
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if path == "/containers/json" && r.Method == http.MethodGet {
		list := []map[string]any{}
		for _, c := range d.containers {
			list = append(list, map[string]any{"Id": c.ID, "Names": []string{c.Name}, "Image": c.Config.Image, "Labels": c.Config.Labels, "State": "running"})
		}
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	id, ok := strings.CutPrefix(path, "/containers/")
	id, ok2 := strings.CutSuffix(id, "/json")
	if !ok || !ok2 || r.Method != http.MethodGet {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "page not found"})
		return
	}
	c, found := d.containers[id]
	if !found {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "No such container: " + id})
		return
	}
	_ = json.NewEncoder(w).Encode(c)
}
