//! The aggregate endpoint's list cursors. The gateway follows every backend's cursors
//! itself and merges the lists; clients page through the merged list with the gateway's
//! own opaque cursor, which names the list's generation (a change of any backend's list
//! starts a new one) and the offset of the next page.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Why a client's cursor cannot be used; each says what would work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CursorError {
    /// Not a cursor this gateway gave.
    Unknown,
    /// Given for a list that has changed since: the client should list again.
    Stale,
}

impl CursorError {
    pub fn message(&self) -> &'static str {
        match self {
            CursorError::Unknown => {
                "Invalid params: this cursor was not given by this gateway; list again without a cursor"
            }
            CursorError::Stale => {
                "Invalid params: the list changed since this cursor was given; list again without a cursor"
            }
        }
    }
}

fn encode(generation: u64, offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("agg1:{generation}:{offset}"))
}

fn decode(cursor: &str) -> Option<(u64, usize)> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let rest = text.strip_prefix("agg1:")?;
    let (generation, offset) = rest.split_once(':')?;
    Some((generation.parse().ok()?, offset.parse().ok()?))
}

/// The page of `items` the cursor asks for, and the cursor of the page after it (`None`
/// on the last page). `page_size` is at least 1.
pub fn page<'a, T>(
    items: &'a [T],
    generation: u64,
    cursor: Option<&str>,
    page_size: usize,
) -> Result<(&'a [T], Option<String>), CursorError> {
    let start = match cursor {
        None => 0,
        Some(cursor) => {
            let (given, offset) = decode(cursor).ok_or(CursorError::Unknown)?;
            if given != generation {
                return Err(CursorError::Stale);
            }
            if offset == 0 || offset > items.len() {
                return Err(CursorError::Unknown);
            }
            offset
        }
    };
    let end = start.saturating_add(page_size.max(1)).min(items.len());
    let next = (end < items.len()).then(|| encode(generation, end));
    Ok((&items[start..end], next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_sees_every_item_exactly_once() {
        let items: Vec<u32> = (0..23).collect();
        for size in [1, 5, 22, 23, 24, 100] {
            let mut seen = Vec::new();
            let mut cursor = None;
            loop {
                let (page, next) = page(&items, 7, cursor.as_deref(), size).unwrap();
                seen.extend_from_slice(page);
                match next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            assert_eq!(seen, items, "page size {size}");
        }
    }

    #[test]
    fn a_host_that_reads_one_page_gets_the_whole_list_when_it_fits() {
        let items: Vec<u32> = (0..250).collect();
        let (first, next) = page(&items, 1, None, 1000).unwrap();
        assert_eq!(first.len(), 250);
        assert!(next.is_none());
        let empty: [u32; 0] = [];
        assert_eq!(page(&empty, 1, None, 10).unwrap(), (&empty[..], None));
    }

    #[test]
    fn stale_and_foreign_cursors_are_refused_with_what_to_do() {
        let items: Vec<u32> = (0..10).collect();
        let (_, next) = page(&items, 3, None, 4).unwrap();
        let next = next.unwrap();
        assert_eq!(page(&items, 4, Some(&next), 4), Err(CursorError::Stale));
        for foreign in [
            "",
            "abc",
            "!!",
            &encode(3, 0),
            &encode(3, 11),
            "YWdnMTp4Ong",
        ] {
            assert_eq!(
                page(&items, 3, Some(foreign), 4),
                Err(CursorError::Unknown),
                "{foreign}"
            );
        }
        assert!(CursorError::Stale.message().contains("list again"));
        assert!(CursorError::Unknown.message().starts_with("Invalid params"));
    }
}
