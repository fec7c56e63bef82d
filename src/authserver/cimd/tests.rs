//! The document rules and the cache, against a real HTTP server on 127.0.0.1 (the fetch
//! policy relaxed to allow it: the address rules have their own tests), and the strict
//! policy refusing loopback, link-local and private addresses before any byte is sent.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

struct Site {
    url: String,
    hits: Arc<AtomicUsize>,
    answer: Arc<std::sync::Mutex<(u16, String, Option<&'static str>)>>,
}

async fn site() -> Site {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/client.json", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let answer = Arc::new(std::sync::Mutex::new((200, String::new(), None)));
    let (h, a) = (hits.clone(), answer.clone());
    let app = axum::Router::new().route(
        "/client.json",
        axum::routing::get(move || {
            let (h, a) = (h.clone(), a.clone());
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                let (status, body, cache) = a.lock().unwrap().clone();
                let mut response = axum::response::Response::new(axum::body::Body::from(body));
                *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                if let Some(cache) = cache {
                    response.headers_mut().insert(
                        http::header::CACHE_CONTROL,
                        http::HeaderValue::from_static(cache),
                    );
                }
                response
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Site { url, hits, answer }
}

fn relaxed() -> Policy {
    Policy {
        require_https: false,
        public_only: false,
        ..Policy::strict()
    }
}

fn good(url: &str) -> String {
    serde_json::json!({
        "client_id": url, "client_name": "Example", "redirect_uris": ["http://127.0.0.1/cb", "https://app.example.com/cb"],
        "token_endpoint_auth_method": "none"
    })
    .to_string()
}

#[tokio::test]
async fn a_good_document_is_used_and_cached_and_a_withdrawn_one_ends_the_client() {
    let site = site().await;
    *site.answer.lock().unwrap() = (200, good(&site.url), None);
    let documents = Documents::new(&[Url::parse(&site.url).unwrap()], relaxed()).unwrap();
    let record = documents.client(&site.url).await.unwrap().unwrap();
    assert_eq!(record.client_name.as_deref(), Some("Example"));
    documents.client(&site.url).await.unwrap().unwrap();
    assert_eq!(site.hits.load(Ordering::SeqCst), 1, "cached");
    assert!(
        documents
            .client("https://not.allowed/x")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn bad_documents_are_refused_with_the_reason() {
    let site = site().await;
    let url = site.url.clone();
    let cases = [
        (200, serde_json::json!({"client_id": "https://other/x", "client_name": "n", "redirect_uris": ["http://127.0.0.1/cb"]}).to_string(), "not its own URL"),
        (200, serde_json::json!({"client_id": url, "redirect_uris": ["http://127.0.0.1/cb"]}).to_string(), "client_name"),
        (200, serde_json::json!({"client_id": url, "client_name": "n", "client_secret": "s", "redirect_uris": ["http://127.0.0.1/cb"]}).to_string(), "client_secret"),
        (200, serde_json::json!({"client_id": url, "client_name": "n", "redirect_uris": ["http://evil.example/cb"]}).to_string(), "neither https nor loopback"),
        (200, serde_json::json!({"client_id": url, "client_name": "n", "token_endpoint_auth_method": "client_secret_basic", "redirect_uris": ["http://127.0.0.1/cb"]}).to_string(), "auth_method"),
        (200, format!("{{\"client_name\": \"{}\"}}", "x".repeat(6000)), "over 5120 bytes"),
        (302, String::new(), "only 200"),
        (500, String::new(), "only 200"),
    ];
    for (status, body, needle) in cases {
        *site.answer.lock().unwrap() = (status, body, None);
        // A new cache each time: a failure is not retried for 30 s.
        let documents = Documents::new(&[Url::parse(&url).unwrap()], relaxed()).unwrap();
        let error = documents.client(&url).await.unwrap_err();
        assert!(error.contains(needle), "{needle}: {error}");
    }
    *site.answer.lock().unwrap() = (404, String::new(), None);
    let documents = Documents::new(&[Url::parse(&url).unwrap()], relaxed()).unwrap();
    assert!(documents.client(&url).await.unwrap().is_none(), "withdrawn");
}

#[tokio::test]
async fn the_last_good_copy_carries_over_a_failed_refetch() {
    let site = site().await;
    *site.answer.lock().unwrap() = (200, good(&site.url), Some("max-age=0"));
    let documents = Documents::new(&[Url::parse(&site.url).unwrap()], relaxed()).unwrap();
    documents.client(&site.url).await.unwrap().unwrap();
    // max-age=0 is clamped to a minute: still fresh, no second fetch.
    documents.client(&site.url).await.unwrap().unwrap();
    assert_eq!(site.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_strict_policy_refuses_non_public_addresses_before_connecting() {
    let site = site().await;
    let port = Url::parse(&site.url).unwrap().port().unwrap();
    // The channel is alive: the relaxed policy reaches the site.
    *site.answer.lock().unwrap() = (200, good(&site.url), None);
    let relaxed_docs = Documents::new(&[Url::parse(&site.url).unwrap()], relaxed()).unwrap();
    relaxed_docs.client(&site.url).await.unwrap().unwrap();
    let reached = site.hits.load(Ordering::SeqCst);
    for url in [
        format!("https://127.0.0.1:{port}/client.json"),
        format!("https://localhost:{port}/client.json"),
        format!("https://[::ffff:127.0.0.1]:{port}/client.json"),
        "https://169.254.169.254/latest/meta-data".to_owned(),
        "https://10.0.0.7/client.json".to_owned(),
        "https://192.168.1.1/client.json".to_owned(),
        format!("http://127.0.0.1:{port}/client.json"),
    ] {
        let url = Url::parse(&url).unwrap();
        let documents = Documents::new(std::slice::from_ref(&url), Policy::strict()).unwrap();
        let error = documents.client(url.as_str()).await.unwrap_err();
        assert!(
            error.contains("not a public address") || error.contains("must be https"),
            "{url}: {error}"
        );
    }
    assert_eq!(
        site.hits.load(Ordering::SeqCst),
        reached,
        "nothing reached the site"
    );
}
