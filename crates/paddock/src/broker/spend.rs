//! What the broker reads of other jobs' spend: the one question it asks
//! of the ledger's store (how much a ticket, or a project on a day, has
//! spent besides this job), as a small trait so the budget and its
//! re-reading task do not hold the store. The shared store answers it;
//! tests answer it with a fake.

use std::sync::Arc;

use crate::store::{SharedStore, SpendScope, StoreError};

/// Where other jobs' settled spend is read.
#[async_trait::async_trait]
pub trait SpendSource: Send + Sync {
    /// The micro-dollars spent in `scope` by jobs other than `except_job`.
    async fn spent_micros(&self, scope: &SpendScope, except_job: &str) -> Result<i64, StoreError>;
}

#[async_trait::async_trait]
impl SpendSource for SharedStore {
    async fn spent_micros(&self, scope: &SpendScope, except_job: &str) -> Result<i64, StoreError> {
        self.as_ref().spent_micros(scope, except_job).await
    }
}

/// The spend source a broker shares between its start and its re-reading
/// task.
pub type SharedSpend = Arc<dyn SpendSource>;
