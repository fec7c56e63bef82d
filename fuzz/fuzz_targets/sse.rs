//! SSE decoding with its per-event size cap (`http::sse::decode`): no event's data is ever
//! larger than the cap, and where both succeed, the events do not depend on how the body
//! was cut into chunks.
#![no_main]

use bytes::Bytes;
use futures_util::StreamExt;
use libfuzzer_sys::fuzz_target;
use mcp_stdio::http::sse::{Event, decode};

fn run(chunks: Vec<Bytes>, max: usize) -> Result<Vec<Event>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let stream = futures_util::stream::iter(chunks.into_iter().map(Ok));
        let mut events = decode(stream, max);
        let mut out = Vec::new();
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| e.to_string())?;
            if let Some(data) = &event.data {
                assert!(data.len() <= max, "an event of {} bytes passed a cap of {max}", data.len());
            }
            out.push(event);
        }
        Ok(out)
    })
}

fuzz_target!(|input: &[u8]| {
    let Some((&shape, body)) = input.split_first() else { return };
    let max = 1 + (shape as usize) * 4;
    let step = 1 + (shape as usize % 13);
    let whole = run(vec![Bytes::copy_from_slice(body)], max);
    let pieces = run(body.chunks(step).map(Bytes::copy_from_slice).collect(), max);
    if let (Ok(whole), Ok(pieces)) = (&whole, &pieces) {
        assert_eq!(whole, pieces, "chunked every {step} bytes");
    }
});
