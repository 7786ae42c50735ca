//! What a failed command must put back, newest first: a guard that runs its
//! steps when dropped unless the command succeeded (`disarm`). ADD records
//! each change's undo as it makes it, so every early return, `?` included,
//! leaves the node as it found it without a hand-written rollback per step.

/// Undo steps, run newest first on drop unless disarmed.
#[derive(Default)]
pub struct Undo<'a> {
    steps: Vec<Box<dyn FnOnce() + 'a>>,
}

impl<'a> Undo<'a> {
    pub fn new() -> Undo<'a> {
        Undo { steps: Vec::new() }
    }

    /// Record how to put back the change just made.
    pub fn push(&mut self, step: impl FnOnce() + 'a) {
        self.steps.push(Box::new(step));
    }

    /// The command succeeded: keep every change.
    pub fn disarm(mut self) {
        self.steps.clear();
    }
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        while let Some(step) = self.steps.pop() {
            step();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn steps_run_newest_first_unless_disarmed() {
        let log = RefCell::new(Vec::new());
        {
            let mut u = Undo::new();
            u.push(|| log.borrow_mut().push(1));
            u.push(|| log.borrow_mut().push(2));
        }
        assert_eq!(*log.borrow(), [2, 1]);
        let mut u = Undo::new();
        u.push(|| log.borrow_mut().push(3));
        u.disarm();
        assert_eq!(*log.borrow(), [2, 1], "a disarmed guard undoes nothing");
    }
}
