//! Work split over every core: the floors that stand for a design running on all of the
//! machine's cores (the own writer, arrow-rs's read) share one way of doing it.

/// Runs `work` on `items` split into one contiguous part per core, each part on its own thread
/// with its index; the parts' results in order. A thread that panicked is an error.
pub fn on_every_core<T, R>(
    items: &mut [T],
    work: impl Fn(usize, &mut [T]) -> anyhow::Result<R> + Sync,
) -> anyhow::Result<Vec<R>>
where
    T: Send,
    R: Send,
{
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let chunk = items.len().div_ceil(threads).max(1);
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks_mut(chunk)
            .enumerate()
            .map(|(i, part)| {
                // Caught in the thread: `scope` itself panics once a thread it ran panicked.
                scope.spawn(move || {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(i, part)))
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker thread panicked")))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker thread panicked")))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_worked_once_in_order() {
        let mut items: Vec<u32> = (0..1000).collect();
        let sums = on_every_core(&mut items, |_, part| {
            for x in part.iter_mut() {
                *x *= 2;
            }
            Ok(part.iter().map(|&x| u64::from(x)).sum::<u64>())
        })
        .unwrap();
        assert_eq!(sums.iter().sum::<u64>(), 999 * 1000);
        assert_eq!(items, (0..1000).map(|x| x * 2).collect::<Vec<u32>>());
    }

    #[test]
    fn a_failing_or_panicking_part_is_an_error() {
        let mut items = vec![1, 2, 3];
        let failed = on_every_core(&mut items, |_, _| -> anyhow::Result<()> {
            anyhow::bail!("no")
        });
        assert!(failed.is_err());
        let panicked = on_every_core(&mut items, |_, part| -> anyhow::Result<()> {
            assert!(part.is_empty(), "a part holds items");
            Ok(())
        });
        assert!(panicked.is_err());
        let none: Vec<()> = on_every_core(&mut Vec::<u8>::new(), |_, _| Ok(())).unwrap();
        assert!(none.is_empty());
    }
}
