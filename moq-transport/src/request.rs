//! Rules shared by every request stream: the first response, REQUEST_UPDATE, and GOAWAY on a
//! request stream (draft-19 §3.3.2, §10.4, §10.9).

use std::time::Duration;

use moq_core::codes::SessionErrorCode;
use moq_core::message::{Goaway, Message, ParamContext, RequestOk, RequestUpdate};

use crate::error::Error;
use crate::session::stream::Reader;
use crate::session::{GoawayInfo, Role, SessionInner};

/// Waits for the answer to a request we sent: REQUEST_OK (checked against `ctx`) or
/// REQUEST_ERROR ([`Error::Rejected`]). Anything else first closes the session with
/// PROTOCOL_VIOLATION (draft-19 §6.1, §10.18).
pub(crate) async fn first_response(
    inner: &SessionInner,
    reader: &mut Reader,
    ctx: ParamContext,
) -> Result<RequestOk, Error> {
    let msg = tokio::select! {
        m = reader.next() => m,
        e = inner.closed() => return Err(e),
    };
    match msg {
        Ok(Some(Message::RequestOk(ok))) => {
            if let Err(e) = ok.validate(ctx, inner.version) {
                let e = Error::from(e);
                inner.close(e.clone());
                return Err(e);
            }
            Ok(ok)
        }
        Ok(Some(Message::RequestError(e))) => Err(Error::Rejected(Box::new(e))),
        Ok(Some(m)) => {
            let e = Error::protocol(format!(
                "{} before the response to {}",
                m.name(),
                ctx.name().trim_end_matches("_OK")
            ));
            inner.close(e.clone());
            Err(e)
        }
        // draft-19 §3.3.2: a FIN before the required messages means the request failed.
        Ok(None) => Err(Error::EndedEarly),
        Err(e) => Err(inner.fail(e)),
    }
}

/// Checks a REQUEST_UPDATE the peer sent on one of our responder streams: a fresh Request ID,
/// parameters allowed for `ctx`, and at most MAX_REQUEST_UPDATES outstanding (counting updates
/// already buffered behind it, since we answer each at once). Session errors close the session.
pub(crate) fn check_update(
    inner: &SessionInner,
    reader: &Reader,
    update: &RequestUpdate,
    ctx: ParamContext,
) -> Result<(), Error> {
    let res = (|| {
        inner.check_peer_request_id(update.request_id)?;
        update.params.validate(ctx, inner.version)?;
        let max = inner.config.max_request_updates;
        if max > 0 && inner.version.has_max_request_updates() {
            let outstanding = 1 + reader.buffered_frames() as u64;
            // draft-19 §10.3.1.7: more than MAX_REQUEST_UPDATES outstanding on one stream.
            if outstanding > max {
                return Err(Error::violation(
                    SessionErrorCode::TOO_MANY_REQUEST_UPDATES,
                    format!("{outstanding} REQUEST_UPDATEs outstanding (at most {max})"),
                ));
            }
        }
        Ok(())
    })();
    if let Err(e) = &res {
        inner.close(e.clone());
    }
    res
}

/// Tracks GOAWAY on one request stream: at most one (draft-19 §10.4), and a client's carries
/// no URI.
#[derive(Debug, Default)]
pub(crate) struct RequestGoaway {
    received: Option<GoawayInfo>,
}

impl RequestGoaway {
    pub(crate) fn on_goaway(
        &mut self,
        inner: &SessionInner,
        g: Goaway,
    ) -> Result<GoawayInfo, Error> {
        let res = if self.received.is_some() {
            Err(Error::protocol("second GOAWAY on a request stream"))
        } else if inner.role == Role::Server && !g.new_session_uri.is_empty() {
            Err(Error::protocol("client GOAWAY with a New Session URI"))
        } else {
            let info = GoawayInfo {
                new_session_uri: String::from_utf8_lossy(&g.new_session_uri).into_owned(),
                timeout: Duration::from_millis(g.timeout_ms),
            };
            self.received = Some(info.clone());
            Ok(info)
        };
        if let Err(e) = &res {
            inner.close(e.clone());
        }
        res
    }
}
