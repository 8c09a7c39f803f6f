//! REST calls with `curl`, as users of Kafka Connect's REST API make them — to Ferry's nodes
//! and to Kafka Connect itself.

use std::process::Command;

use serde_json::Value;

/// What a request carries.
#[derive(Clone, Copy, Debug)]
pub enum Body<'a> {
    /// Nothing.
    None,
    /// JSON, as `Content-Type: application/json`.
    Json(&'a Value),
    /// These bytes, as this media type.
    Raw(&'a str, &'a str),
}

/// An answer.
#[derive(Clone, Debug)]
pub struct Answer {
    /// Its status.
    pub status: u16,
    /// Its headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Its JSON body (`Value::Null` when empty; a string when not JSON).
    pub body: Value,
}

impl Answer {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `method` `base``path` with `body`; `None` if nothing answered.
pub fn call(base: &str, method: &str, path: &str, body: Body<'_>) -> Option<Answer> {
    call_with(base, method, path, body, &[])
}

/// `call`, with these request headers too.
pub fn call_with(
    base: &str,
    method: &str,
    path: &str,
    body: Body<'_>,
    headers: &[(&str, &str)],
) -> Option<Answer> {
    let mut curl = Command::new("curl");
    curl.args(["-s", "-i", "-m", "30", "-X", method, "-w", "\n%{http_code}"])
        .arg(format!("{base}{path}"));
    for (name, value) in headers {
        curl.arg("-H").arg(format!("{name}: {value}"));
    }
    match body {
        Body::None => {}
        Body::Json(value) => {
            curl.args(["-H", "Content-Type: application/json", "-d"])
                .arg(value.to_string());
        }
        Body::Raw(media, text) => {
            curl.args(["-H", &format!("Content-Type: {media}"), "--data-binary"])
                .arg(text);
        }
    }
    let out = curl.output().expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let (rest, code) = text.rsplit_once('\n')?;
    let status: u16 = code.trim().parse().ok().filter(|c| *c != 0)?;
    let (head, body) = rest.split_once("\r\n\r\n").unwrap_or((rest, ""));
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = if body.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()))
    };
    Some(Answer {
        status,
        headers,
        body,
    })
}
