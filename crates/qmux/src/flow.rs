//! Receive credit: what we advertised, what the application consumed, and when to grant more.

/// One receive window (a stream's MAX_STREAM_DATA or the connection's MAX_DATA).
///
/// The advertised maximum stays `window` ahead of consumption: once less than half of the
/// window remains ahead of what the application read, a larger maximum is due. Bytes held
/// unread can therefore never exceed `window`.
#[derive(Debug, Clone)]
pub(crate) struct RecvCredit {
    window: u64,
    /// The limit the peer was last told (or will be told by the pending update).
    pub(crate) max: u64,
    /// Bytes the application consumed (or we discarded).
    consumed: u64,
}

impl RecvCredit {
    pub(crate) fn new(window: u64) -> Self {
        Self {
            window,
            max: window,
            consumed: 0,
        }
    }

    /// Change the window. A larger one is advertised at once (`true`: a larger maximum is
    /// due); a smaller one takes effect as the application reads, since credit already
    /// advertised cannot be taken back.
    pub(crate) fn set_window(&mut self, window: u64) -> bool {
        self.window = window;
        let next = self.consumed.saturating_add(window).min(crate::varint::MAX);
        if next > self.max {
            self.max = next;
            return true;
        }
        false
    }

    /// Record `n` more bytes consumed; `true` when a larger maximum is now due.
    pub(crate) fn consume(&mut self, n: u64) -> bool {
        self.consumed = self.consumed.saturating_add(n);
        if self.max.saturating_sub(self.consumed) < self.window / 2 || self.window == 0 && n > 0 {
            let next = self
                .consumed
                .saturating_add(self.window)
                .min(crate::varint::MAX);
            if next > self.max {
                self.max = next;
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_is_granted_past_half_the_window() {
        let mut c = RecvCredit::new(100);
        assert!(!c.consume(50));
        assert_eq!(c.max, 100);
        assert!(c.consume(1));
        assert_eq!(c.max, 151);
        assert!(!c.consume(0));
    }

    #[test]
    fn a_grown_window_is_advertised_at_once_and_a_shrunk_one_as_it_is_read() {
        let mut c = RecvCredit::new(100);
        assert!(c.consume(60));
        assert_eq!(c.max, 160);
        assert!(c.set_window(400), "grown: advertised now");
        assert_eq!(c.max, 460);
        assert!(!c.set_window(50), "shrunk: nothing taken back");
        assert_eq!(c.max, 460);
        // Credit grows again only once consumption comes within half the new window.
        assert!(!c.consume(300));
        assert_eq!(c.max, 460);
        assert!(c.consume(90));
        assert_eq!(c.max, 500);
    }
}
