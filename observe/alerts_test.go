package observe_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The alerting rules the examples ship, their unit tests, and the
// Prometheus configuration that loads them.
var (
	alertsFile     = filepath.Join(examplesDir, "prometheus/alerts.yml")
	alertTestsFile = filepath.Join(examplesDir, "prometheus/alerts_test.yml")
	prometheusFile = filepath.Join(examplesDir, "prometheus/prometheus.yml")
)

// alertRule is the part of a Prometheus alerting rule the checks read.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// readYAML decodes the YAML file at path into v, failing the test when
// it cannot.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// shippedAlerts returns the rules of examples/prometheus/alerts.yml, in
// file order.
func shippedAlerts(t *testing.T) []alertRule {
	t.Helper()
	var file struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, alertsFile, &file)
	var rules []alertRule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rule", alertsFile)
	}
	return rules
}

// docsAlerts returns the alerting rules of the yaml blocks of
// docs/observability.md, as the text of the blocks and parsed.
func docsAlerts(t *testing.T) (string, []alertRule) {
	t.Helper()
	md, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, block := range strings.Split(string(md), "```yaml\n")[1:] {
		if body, _, ok := strings.Cut(block, "```"); ok && strings.Contains(body, "- alert:") {
			blocks = append(blocks, body)
		}
	}
	text := strings.Join(blocks, "")
	var rules []alertRule
	if err := yaml.Unmarshal([]byte(text), &rules); err != nil {
		t.Fatalf("the alert rules of docs/observability.md do not parse: %v\n%s", err, text)
	}
	return text, rules
}

// runPromtool runs promtool with args, skipping the test when promtool is
// not installed, and failing it with promtool's output when promtool
// refuses.
func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus); .ci/run installs it")
	}
	if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Guarantee: every shipped alerting rule has a name, a for duration, a
// severity label of warning or critical, and a summary and a description,
// no two rules share a name, and promtool accepts the file.
func TestAlertRulesPassPromtool(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range shippedAlerts(t) {
		where := "alert " + r.Alert
		switch {
		case r.Alert == "":
			t.Errorf("a rule has no alert name: %+v", r)
		case seen[r.Alert]:
			t.Errorf("%s: named twice", where)
		}
		seen[r.Alert] = true
		if r.For == "" {
			t.Errorf("%s: no for duration", where)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", where, s)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", where, a)
			}
		}
	}
	runPromtool(t, "check", "rules", alertsFile)
}

// targetDownAlert is the one shipped rule over a series Prometheus makes
// itself, up, rather than one an Observer exports.
const targetDownAlert = "BoulevardTargetDown"

// Guarantee: every metric (and label) the expression of each shipped
// alerting rule names is one a live Observer exports, but for the rule
// over Prometheus's up.
func TestAlertRulesQueryExportedMetrics(t *testing.T) {
	fams := liveFamilies(t)
	for _, r := range shippedAlerts(t) {
		if r.Alert == targetDownAlert {
			continue // TestTargetDownSelectsTheScrapeJobs
		}
		checkExpr(t, "alert "+r.Alert, r.Expr, fams)
	}
}

// Guarantee: the rule on Prometheus's up selects, by job, exactly the
// scrape jobs of the shipped Prometheus configuration, so that a job
// renamed or added there is not silently left out.
func TestTargetDownSelectsTheScrapeJobs(t *testing.T) {
	var prom struct {
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, prometheusFile, &prom)
	var jobs []string
	for _, sc := range prom.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
	}
	want := `up{job="` + strings.Join(jobs, "|") + `"} == 0`
	if len(jobs) > 1 {
		want = `up{job=~"` + strings.Join(jobs, "|") + `"} == 0`
	}
	for _, r := range shippedAlerts(t) {
		if r.Alert == targetDownAlert {
			if r.Expr != want {
				t.Errorf("alert %s: expression %q, want %q for the jobs of %s", r.Alert, r.Expr, want, prometheusFile)
			}
			return
		}
	}
	t.Errorf("%s has no alert %s", alertsFile, targetDownAlert)
}

// Guarantee: the unit tests of the shipped alerting rules pass (promtool
// test rules), and they show each rule both firing and keeping quiet.
func TestAlertRulesFireWhenTheyShould(t *testing.T) {
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, alertTestsFile, &tests)
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(alertsFile)}) {
		t.Errorf("%s tests the rules of %v, want %s", alertTestsFile, tests.RuleFiles, filepath.Base(alertsFile))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, r := range shippedAlerts(t) {
		if !fires[r.Alert] {
			t.Errorf("%s: no test where alert %s fires", alertTestsFile, r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no test where alert %s keeps quiet", alertTestsFile, r.Alert)
		}
	}
	runPromtool(t, "test", "rules", alertTestsFile)
}

// Guarantee: the alerting rules docs/observability.md quotes are shipped
// rules, with the same expression and for duration.
func TestAlertsInTheDocsAreShippedRules(t *testing.T) {
	text, quoted := docsAlerts(t)
	if len(quoted) < 3 {
		t.Fatalf("docs/observability.md quotes %d alert rules, want three or more:\n%s", len(quoted), text)
	}
	shipped := map[string]alertRule{}
	for _, r := range shippedAlerts(t) {
		shipped[r.Alert] = r
	}
	for _, q := range quoted {
		r, ok := shipped[q.Alert]
		switch {
		case !ok:
			t.Errorf("the docs quote alert %s, which %s does not have", q.Alert, alertsFile)
		case strings.Join(strings.Fields(q.Expr), " ") != strings.Join(strings.Fields(r.Expr), " ") || q.For != r.For:
			t.Errorf("the docs quote alert %s as %q for %q; %s has %q for %q", q.Alert, q.Expr, q.For, alertsFile, r.Expr, r.For)
		}
	}
}

// Guarantee: the Prometheus of examples/docker-compose.yml finds each
// rules file prometheus.yml loads: the compose file mounts it beside
// prometheus.yml.
func TestComposeMountsThePrometheusRuleFiles(t *testing.T) {
	var prom struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	readYAML(t, prometheusFile, &prom)
	if !slices.Contains(prom.RuleFiles, filepath.Base(alertsFile)) {
		t.Errorf("%s loads the rule files %v, not %s", prometheusFile, prom.RuleFiles, filepath.Base(alertsFile))
	}
	var compose struct {
		Services map[string]struct {
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	readYAML(t, filepath.Join(examplesDir, "docker-compose.yml"), &compose)
	volumes := compose.Services["prometheus"].Volumes
	for _, f := range append([]string{filepath.Base(prometheusFile)}, prom.RuleFiles...) {
		if want := "./prometheus/" + f + ":/etc/prometheus/" + f + ":ro"; !slices.Contains(volumes, want) {
			t.Errorf("the compose file's prometheus mounts %v, not %s", volumes, want)
		}
	}
}
