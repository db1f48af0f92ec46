package pipes_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// A step opens its session, reports, and closes with the step's error.
func ExampleOpen() {
	s, err := pipes.Open(pipes.Options{Args: os.Args[1:], LookupEnv: os.LookupEnv})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Recover()
	err = s.ReportAssetMaterialization(pipes.Materialization{
		Metadata: pipes.Metadata{"loss": pipes.Float(2), "dashboard": pipes.URL("http://127.0.0.1:8265")},
	})
	_ = s.CloseWithError(err)
	fmt.Println("active:", s.Active())
	// Output: active: false
}

// A runner relays a child's output: plain lines go to stdout untouched, the
// child's materialization gets extra metadata and is forwarded to Dagster.
func ExampleRelay() {
	s, _ := pipes.Open(pipes.Options{Stdout: os.Stdout}) // inactive here: Forward writes nothing
	r := &pipes.Relay{
		Out: s.Stdout(),
		OnMessage: func(m *pipes.Message) error {
			if m.Method != pipes.MethodReportMaterialize {
				return s.Forward(m)
			}
			mat, err := m.Materialization()
			if err != nil {
				return err
			}
			mat.Metadata["ray_job_id"] = pipes.Text("raysubmit_123")
			amended, err := pipes.MaterializationMessage(mat)
			if err != nil {
				return err
			}
			fmt.Printf("forwarding %s\n", amended.Line())
			return s.Forward(amended)
		},
	}
	driver := "epoch 1\n" +
		`{"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key": "model", "data_version": null, "metadata": {"auc": {"raw_value": 1.0, "type": "float"}}}}` +
		"\nepoch 2\n"
	if _, err := r.ReadFrom(strings.NewReader(driver)); err != nil {
		fmt.Println(err)
	}
	// Output:
	// epoch 1
	// forwarding {"__dagster_pipes_version": "0.1", "method": "report_asset_materialization", "params": {"asset_key":"model","data_version":null,"metadata":{"auc":{"raw_value":1.0,"type":"float"},"ray_job_id":{"raw_value":"raysubmit_123","type":"text"}}}}
	// epoch 2
}

// A child process gets a bootstrap that carries the context inline and
// sends its messages to stdout.
func ExampleBootstrapEnv() {
	env, err := pipes.BootstrapEnv(pipes.ContextDataParams(pipes.ContextData{RunID: "r1"}), pipes.StdioMessagesParams("stdout"))
	if err != nil {
		fmt.Println(err)
		return
	}
	var back pipes.Params
	_ = pipes.DecodeBootstrap(env[pipes.EnvMessages], &back)
	fmt.Println(back["stdio"])
	// Output: stdout
}
