package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"time"
)

// materialization is the params of a report_asset_materialization message.
type materialization struct {
	AssetKey    string                     `json:"asset_key"`
	DataVersion *string                    `json:"data_version"`
	Metadata    map[string]json.RawMessage `json:"metadata"`
}

// hold keeps a driver's materialization until the end, merging repeated
// reports for one asset (later metadata keys and data version win).
func (s *state) hold(m Message) error {
	var p materialization
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	if p.AssetKey == "" {
		return errors.New(`params: no "asset_key"`)
	}
	for _, h := range s.held {
		if h.AssetKey == p.AssetKey {
			maps.Copy(h.Metadata, p.Metadata)
			if p.DataVersion != nil {
				h.DataVersion = p.DataVersion
			}
			return nil
		}
	}
	if p.Metadata == nil {
		p.Metadata = map[string]json.RawMessage{}
	}
	s.held = append(s.held, &p)
	return nil
}

// report sends the materializations once, at the end: the driver's, with
// raystep's metadata merged in, or raystep's own for each asset when the job
// succeeded and the driver reported none. Nothing is reported when no job
// was submitted.
func (s *state) report(stepErr error) {
	if !s.submitted {
		return
	}
	mats := s.held
	if len(mats) == 0 && stepErr == nil {
		for _, key := range s.step.Dagster.AssetKeys {
			mats = append(mats, &materialization{AssetKey: key})
		}
	}
	ours := s.metadata()
	for _, mat := range mats {
		merged := maps.Clone(mat.Metadata)
		if merged == nil {
			merged = map[string]json.RawMessage{}
		}
		maps.Copy(merged, ours)
		s.sendMaterialization(materialization{AssetKey: mat.AssetKey, DataVersion: mat.DataVersion, Metadata: merged}, ours)
	}
}

// sendMaterialization sends mat; if the session refuses it (the driver's
// metadata was invalid), it sends raystep's own metadata alone instead.
func (s *state) sendMaterialization(mat materialization, ours map[string]json.RawMessage) {
	if s.r.Session == nil {
		s.renderMaterialization(mat)
		return
	}
	raw, err := json.Marshal(mat)
	if err == nil {
		err = s.r.Session.Send(Message{Method: methodMaterialization, Params: raw})
	}
	if errors.Is(err, ErrInvalidMessage) {
		s.warn(PhaseReport, "the driver's materialization of %s was invalid (%v): reporting raystep's metadata alone", mat.AssetKey, err)
		mat.Metadata = ours
		raw, err = json.Marshal(mat)
		if err == nil {
			err = s.r.Session.Send(Message{Method: methodMaterialization, Params: raw})
		}
	}
	if err != nil && s.sendErr == nil {
		s.sendErr = fmt.Errorf("report materialization of %s: %w", mat.AssetKey, err)
	}
}

// metadata is raystep's own metadata, every key prefixed "raystep/".
func (s *state) metadata() map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	put := func(key, typ string, v any) { m["raystep/"+key] = metaValue(typ, v) }
	put("submission_id", "text", s.id)
	if s.info.JobID != "" {
		put("ray_job_id", "text", s.info.JobID)
	}
	if u := s.dash.shownURL(); u != "" {
		put("dashboard_url", "url", u)
	}
	put("backend", "text", s.r.Backend.Name())
	if s.cluster != nil {
		put("cluster", "text", s.cluster.Name())
	}
	if s.step.Shape != "" {
		put("cluster_shape", "text", s.step.Shape)
	}
	put("spec", "text", s.step.Name)
	if s.step.Kind != "" {
		put("kind", "text", s.step.Kind)
	}
	if s.info.Status != "" {
		put("status", "text", string(s.info.Status))
	}
	put("attached", "bool", s.attached)
	if s.step.GPUType != "" {
		put("gpu_type", "text", s.step.GPUType)
	}
	put("gpu_count", "int", s.step.GPUCount)
	put("gpu_hours", "float", floatValue(round(float64(s.step.GPUCount)*s.jobTime().Hours(), 1e6)))
	for _, pt := range s.durations {
		put("duration_"+string(pt.phase)+"_s", "float", seconds(pt.d))
	}
	put("duration_total_s", "float", seconds(s.clock.Now().Sub(s.start)))
	return m
}

// jobTime is how long the job held the cluster: Ray's start to end when
// Ray knows both, else the time raystep followed it.
func (s *state) jobTime() time.Duration {
	if !s.info.Start.IsZero() && s.info.End.After(s.info.Start) {
		return s.info.End.Sub(s.info.Start)
	}
	return s.duration(PhaseRun)
}

// metaValue encodes one Pipes metadata value.
func metaValue(typ string, v any) json.RawMessage {
	raw, err := json.Marshal(struct {
		RawValue any    `json:"raw_value"`
		Type     string `json:"type"`
	}{v, typ})
	if err != nil { // only plain values are passed in
		panic(fmt.Sprintf("runner: encode metadata value: %v", err))
	}
	return raw
}

// seconds is d in seconds, to the millisecond, as a float that stays one.
func seconds(d time.Duration) floatValue {
	return floatValue(round(d.Seconds(), 1e3))
}

// round rounds f to 1/scale.
func round(f, scale float64) float64 { return math.Round(f*scale) / scale }

// floatValue encodes as a JSON number that keeps its decimal point, so
// Dagster reads float metadata as a float (encoding/json writes 2.0 as 2).
type floatValue float64

// MarshalJSON writes f with at least one decimal; NaN and infinities,
// which JSON cannot carry, become null.
func (f floatValue) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	b := strconv.AppendFloat(nil, v, 'f', -1, 64)
	if !bytes.ContainsRune(b, '.') {
		b = append(b, ".0"...)
	}
	return b, nil
}

// close sends "closed" (with the exception when the step failed) and, for
// a person, the step's last line.
func (s *state) close(stepErr error) error {
	if s.r.Progress != nil {
		total := s.clock.Now().Sub(s.start).Seconds()
		if stepErr == nil {
			s.progress("done", fmt.Sprintf("job %s %s in %.1fs", s.id, s.info.Status, total))
		} else {
			s.progress("failed", stepErr.Error())
		}
	}
	if s.r.Session == nil {
		return nil
	}
	if stepErr != nil { // shown in the run's event log, beside the exception
		s.send(methodLog, map[string]any{"message": "raystep failed: " + stepErr.Error(), "level": "ERROR"})
	}
	if err := s.r.Session.Close(exceptionFor(stepErr)); err != nil {
		return &InfraError{Phase: PhaseReport, Err: fmt.Errorf("close pipes session: %w", err)}
	}
	return nil
}
