import XCTest

// The cluster-mode contract on every deployment `--redis-url` takes: the suites written for one
// `redis-server` run again, unchanged, on a real Redis Cluster (3 masters, 3 replicas:
// `redis+cluster://`) and a real Sentinel set (master, replica, 3 sentinels: `redis+sentinel://`), each
// shared by every suite of the test process (`SharedRedis`), with the URL's default of one replica ack.
// The nodes are in-process `Application`s on 127.0.0.1:0, as in the suites themselves.
//
// XCTest on Linux finds only the test methods a class declares: each test is overridden here, calling
// the suite's own. A test added to one of these suites is added here too.

/// ClusterModeTests (the core contract: create, read, inputs at the owner and forwarded, streams and replay, takeover after shutdown and after a node dies, orphans, delete, watched sessions, zombies fenced) on the shared Redis Cluster.
final class ClusterModeOnRedisClusterTests: ClusterModeTests {
    override class var deployment: RedisDeployment { .cluster }

    override func testSessionCreatedOnAIsReadOnEveryNodeAndInputsAtTheOwnerAreAcknowledgedOnceStored() throws {
        try super.testSessionCreatedOnAIsReadOnEveryNodeAndInputsAtTheOwnerAreAcknowledgedOnceStored()
    }

    override func testAnInputAtANonOwnerIsForwardedToTheOwnerAndAcknowledgedOnlyOnceCommitted() throws {
        try super.testAnInputAtANonOwnerIsForwardedToTheOwnerAndAcknowledgedOnlyOnceCommitted()
    }

    override func testAStreamOnAnotherNodeSeesTheOwnersEventsWithTheStoredIdsAndReplaysFromLastEventID() throws {
        try super.testAStreamOnAnotherNodeSeesTheOwnersEventsWithTheStoredIdsAndReplaysFromLastEventID()
    }

    override func testAStreamAtTheOwnerIsFedByItsCommitsAndFollowsATakeoverThroughRedis() throws {
        try super.testAStreamAtTheOwnerIsFedByItsCommitsAndFollowsATakeoverThroughRedis()
    }

    override func testAStreamWhoseSubscriptionNeverConfirmsIsAnswered503AtItsDeadline() throws {
        try super.testAStreamWhoseSubscriptionNeverConfirmsIsAnswered503AtItsDeadline()
    }

    override func testShutdownHandsTheSessionOverAtOnceAndTheNextNodeContinuesWithTheStateAndLaterIds() throws {
        try super.testShutdownHandsTheSessionOverAtOnceAndTheNextNodeContinuesWithTheStateAndLaterIds()
    }

    override func testAKilledOwnersSessionIsTakenOverWithinTheLeaseTTLWithItsState() throws {
        try super.testAKilledOwnersSessionIsTakenOverWithinTheLeaseTTLWithItsState()
    }

    override func testASearchLoadingWhenItsOwnerDiedIsIssuedAgainByTheNodeThatTakesOver() throws {
        try super.testASearchLoadingWhenItsOwnerDiedIsIssuedAgainByTheNodeThatTakesOver()
    }

    override func testAnOrphanedSessionWithAStreamElsewhereIsTakenOverWithoutARequest() throws {
        try super.testAnOrphanedSessionWithAStreamElsewhereIsTakenOverWithoutARequest()
    }

    override func testDeleteAtANonOwnerIsForwardedAndEndsTheStreamsOnEveryNode() throws {
        try super.testDeleteAtANonOwnerIsForwardedAndEndsTheStreamsOnEveryNode()
    }

    override func testASessionStreamedOnAnotherNodeDoesNotExpireWhileItIsWatched() throws {
        try super.testASessionStreamedOnAnotherNodeDoesNotExpireWhileItIsWatched()
    }

    override func testAZombieOwnerCannotCommitAfterBeingTakenOver() throws {
        try super.testAZombieOwnerCannotCommitAfterBeingTakenOver()
    }

    override func testReadinessFollowsRedis() throws {
        throw XCTSkip(
            "kills the one Redis: on a cluster and on Sentinel a master's death is a failover (ClusterFailoverTests, ClusterSentinelFailoverTests)"
        )
    }
}

/// ClusterForwardingTests (forwarding to the live owner: remembered holders, a forward that reaches nobody, unreadable messages, `moved` answers) on the shared Redis Cluster.
final class ClusterForwardingOnRedisClusterTests: ClusterForwardingTests {
    override class var deployment: RedisDeployment { .cluster }

    override func testInputsAtANonOwnerAskWhoHoldsTheLeaseOnceThenGoStraightToTheOwner() throws {
        try super.testInputsAtANonOwnerAskWhoHoldsTheLeaseOnceThenGoStraightToTheOwner()
    }

    override func testAForwardThatReachesNobodyAcquiresAgainAndTakesTheSessionOver() throws {
        try super.testAForwardThatReachesNobodyAcquiresAgainAndTakesTheSessionOver()
    }

    override func testUnreadableForwardingMessagesAreDroppedAndLoggedWithoutTheirContent() throws {
        try super.testUnreadableForwardingMessagesAreDroppedAndLoggedWithoutTheirContent()
    }

    override func testAMovedAnswerFromAnotherReceiverDoesNotHideTheOwnersAnswer() async throws {
        try await super.testAMovedAnswerFromAnotherReceiverDoesNotHideTheOwnersAnswer()
    }
}

/// ClusterMultiplexedTests (one multiplexed stream over sessions run by other nodes) on the shared Redis Cluster.
final class ClusterMultiplexedOnRedisClusterTests: ClusterMultiplexedTests {
    override class var deployment: RedisDeployment { .cluster }

    override func testAStreamOnOneNodeCarriesSessionsRunByOthersAndResumesFromItsPosition() throws {
        try super.testAStreamOnOneNodeCarriesSessionsRunByOthersAndResumesFromItsPosition()
    }
}

/// ClusterUpstreamTests (one upstream, shared: the GitHub budget, the search cache and `status`) on the shared Redis Cluster.
final class ClusterUpstreamOnRedisClusterTests: ClusterUpstreamTests {
    override class var deployment: RedisDeployment { .cluster }

    override func testARateLimitSeenThroughOneNodeBlocksTheOthersWithoutCallingGitHub() throws {
        try super.testARateLimitSeenThroughOneNodeBlocksTheOthersWithoutCallingGitHub()
    }

    override func testAnOutageOrARateLimitSeenByOneNodeShowsInEveryNodesStatusWithoutItSearching() throws {
        try super.testAnOutageOrARateLimitSeenByOneNodeShowsInEveryNodesStatusWithoutItSearching()
    }

    override func testIdenticalConcurrentSearchesOnThreeNodesCostOneUpstreamCall() throws {
        try super.testIdenticalConcurrentSearchesOnThreeNodesCostOneUpstreamCall()
    }

    override func testAWaitForADeadLockHolderRunsOutAndIsCountedAsALockTimeout() throws {
        try super.testAWaitForADeadLockHolderRunsOutAndIsCountedAsALockTimeout()
    }

    override func testAnExpiredSharedEntryIsRevalidatedWithItsETag() throws {
        try super.testAnExpiredSharedEntryIsRevalidatedWithItsETag()
    }

    override func testA304RevalidationLeavesTheSharedBucketAsItWas() throws {
        try super.testA304RevalidationLeavesTheSharedBucketAsItWas()
    }

    override func testADeadPostersBlockMessageEndsWithTheBlockOnTheOtherNodes() throws {
        try super.testADeadPostersBlockMessageEndsWithTheBlockOnTheOtherNodes()
    }

    override func testANewerPostBeforeTheBlocksEndWins() throws { try super.testANewerPostBeforeTheBlocksEndWins() }

    override func testARepeatedReportIsPostedAgainAfterAnotherNodesPost() throws {
        try super.testARepeatedReportIsPostedAgainAfterAnotherNodesPost()
    }

    override func testXCacheSaysMissOnlyWhenGitHubWasCalledForTheAnswer() throws {
        try super.testXCacheSaysMissOnlyWhenGitHubWasCalledForTheAnswer()
    }
}

/// ClusterModeTests (the core contract: create, read, inputs at the owner and forwarded, streams and replay, takeover after shutdown and after a node dies, orphans, delete, watched sessions, zombies fenced) on the shared Sentinel set.
final class ClusterModeOnSentinelTests: ClusterModeTests {
    override class var deployment: RedisDeployment { .sentinel }

    override func testSessionCreatedOnAIsReadOnEveryNodeAndInputsAtTheOwnerAreAcknowledgedOnceStored() throws {
        try super.testSessionCreatedOnAIsReadOnEveryNodeAndInputsAtTheOwnerAreAcknowledgedOnceStored()
    }

    override func testAnInputAtANonOwnerIsForwardedToTheOwnerAndAcknowledgedOnlyOnceCommitted() throws {
        try super.testAnInputAtANonOwnerIsForwardedToTheOwnerAndAcknowledgedOnlyOnceCommitted()
    }

    override func testAStreamOnAnotherNodeSeesTheOwnersEventsWithTheStoredIdsAndReplaysFromLastEventID() throws {
        try super.testAStreamOnAnotherNodeSeesTheOwnersEventsWithTheStoredIdsAndReplaysFromLastEventID()
    }

    override func testAStreamAtTheOwnerIsFedByItsCommitsAndFollowsATakeoverThroughRedis() throws {
        try super.testAStreamAtTheOwnerIsFedByItsCommitsAndFollowsATakeoverThroughRedis()
    }

    override func testAStreamWhoseSubscriptionNeverConfirmsIsAnswered503AtItsDeadline() throws {
        try super.testAStreamWhoseSubscriptionNeverConfirmsIsAnswered503AtItsDeadline()
    }

    override func testShutdownHandsTheSessionOverAtOnceAndTheNextNodeContinuesWithTheStateAndLaterIds() throws {
        try super.testShutdownHandsTheSessionOverAtOnceAndTheNextNodeContinuesWithTheStateAndLaterIds()
    }

    override func testAKilledOwnersSessionIsTakenOverWithinTheLeaseTTLWithItsState() throws {
        try super.testAKilledOwnersSessionIsTakenOverWithinTheLeaseTTLWithItsState()
    }

    override func testASearchLoadingWhenItsOwnerDiedIsIssuedAgainByTheNodeThatTakesOver() throws {
        try super.testASearchLoadingWhenItsOwnerDiedIsIssuedAgainByTheNodeThatTakesOver()
    }

    override func testAnOrphanedSessionWithAStreamElsewhereIsTakenOverWithoutARequest() throws {
        try super.testAnOrphanedSessionWithAStreamElsewhereIsTakenOverWithoutARequest()
    }

    override func testDeleteAtANonOwnerIsForwardedAndEndsTheStreamsOnEveryNode() throws {
        try super.testDeleteAtANonOwnerIsForwardedAndEndsTheStreamsOnEveryNode()
    }

    override func testASessionStreamedOnAnotherNodeDoesNotExpireWhileItIsWatched() throws {
        try super.testASessionStreamedOnAnotherNodeDoesNotExpireWhileItIsWatched()
    }

    override func testAZombieOwnerCannotCommitAfterBeingTakenOver() throws {
        try super.testAZombieOwnerCannotCommitAfterBeingTakenOver()
    }

    override func testReadinessFollowsRedis() throws {
        throw XCTSkip(
            "kills the one Redis: on a cluster and on Sentinel a master's death is a failover (ClusterFailoverTests, ClusterSentinelFailoverTests)"
        )
    }
}

/// ClusterForwardingTests (forwarding to the live owner: remembered holders, a forward that reaches nobody, unreadable messages, `moved` answers) on the shared Sentinel set.
final class ClusterForwardingOnSentinelTests: ClusterForwardingTests {
    override class var deployment: RedisDeployment { .sentinel }

    override func testInputsAtANonOwnerAskWhoHoldsTheLeaseOnceThenGoStraightToTheOwner() throws {
        try super.testInputsAtANonOwnerAskWhoHoldsTheLeaseOnceThenGoStraightToTheOwner()
    }

    override func testAForwardThatReachesNobodyAcquiresAgainAndTakesTheSessionOver() throws {
        try super.testAForwardThatReachesNobodyAcquiresAgainAndTakesTheSessionOver()
    }

    override func testUnreadableForwardingMessagesAreDroppedAndLoggedWithoutTheirContent() throws {
        try super.testUnreadableForwardingMessagesAreDroppedAndLoggedWithoutTheirContent()
    }

    override func testAMovedAnswerFromAnotherReceiverDoesNotHideTheOwnersAnswer() async throws {
        try await super.testAMovedAnswerFromAnotherReceiverDoesNotHideTheOwnersAnswer()
    }
}

/// ClusterMultiplexedTests (one multiplexed stream over sessions run by other nodes) on the shared Sentinel set.
final class ClusterMultiplexedOnSentinelTests: ClusterMultiplexedTests {
    override class var deployment: RedisDeployment { .sentinel }

    override func testAStreamOnOneNodeCarriesSessionsRunByOthersAndResumesFromItsPosition() throws {
        try super.testAStreamOnOneNodeCarriesSessionsRunByOthersAndResumesFromItsPosition()
    }
}

/// ClusterUpstreamTests (one upstream, shared: the GitHub budget, the search cache and `status`) on the shared Sentinel set.
final class ClusterUpstreamOnSentinelTests: ClusterUpstreamTests {
    override class var deployment: RedisDeployment { .sentinel }

    override func testARateLimitSeenThroughOneNodeBlocksTheOthersWithoutCallingGitHub() throws {
        try super.testARateLimitSeenThroughOneNodeBlocksTheOthersWithoutCallingGitHub()
    }

    override func testAnOutageOrARateLimitSeenByOneNodeShowsInEveryNodesStatusWithoutItSearching() throws {
        try super.testAnOutageOrARateLimitSeenByOneNodeShowsInEveryNodesStatusWithoutItSearching()
    }

    override func testIdenticalConcurrentSearchesOnThreeNodesCostOneUpstreamCall() throws {
        try super.testIdenticalConcurrentSearchesOnThreeNodesCostOneUpstreamCall()
    }

    override func testAWaitForADeadLockHolderRunsOutAndIsCountedAsALockTimeout() throws {
        try super.testAWaitForADeadLockHolderRunsOutAndIsCountedAsALockTimeout()
    }

    override func testAnExpiredSharedEntryIsRevalidatedWithItsETag() throws {
        try super.testAnExpiredSharedEntryIsRevalidatedWithItsETag()
    }

    override func testA304RevalidationLeavesTheSharedBucketAsItWas() throws {
        try super.testA304RevalidationLeavesTheSharedBucketAsItWas()
    }

    override func testADeadPostersBlockMessageEndsWithTheBlockOnTheOtherNodes() throws {
        try super.testADeadPostersBlockMessageEndsWithTheBlockOnTheOtherNodes()
    }

    override func testANewerPostBeforeTheBlocksEndWins() throws { try super.testANewerPostBeforeTheBlocksEndWins() }

    override func testARepeatedReportIsPostedAgainAfterAnotherNodesPost() throws {
        try super.testARepeatedReportIsPostedAgainAfterAnotherNodesPost()
    }

    override func testXCacheSaysMissOnlyWhenGitHubWasCalledForTheAnswer() throws {
        try super.testXCacheSaysMissOnlyWhenGitHubWasCalledForTheAnswer()
    }
}
