//! Reading an HTTP answer whole, but never more than a limit: the upstream
//! and the token endpoints are outside Paddock's control, and a body read
//! with `bytes()` or `text()` grows as long as they send. A declared
//! `Content-Length` past the limit is refused before any byte is read.

use bytes::{Bytes, BytesMut};

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the answer is longer than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("cannot read the answer: {0}")]
    Read(#[source] reqwest::Error),
}

/// The body of `resp`, at most `limit` bytes.
pub async fn read(mut resp: reqwest::Response, limit: usize) -> Result<Bytes, BodyError> {
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| BodyError::Read(e.without_url()))?
    {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// The body of `resp` as text (lossy UTF-8), at most `limit` bytes.
pub async fn read_text(resp: reqwest::Response, limit: usize) -> Result<String, BodyError> {
    let body = read(resp, limit).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}
