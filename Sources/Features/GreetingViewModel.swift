import ViewModels

/// The `greeting` view model: one per session, touched only on its session's owner.
public typealias GreetingViewModel = Store<GreetingFeature>

extension Store where Feature == GreetingFeature {
    /// A greeter with an empty name and no label. It has no effects, so it needs no executor.
    public convenience init() {
        self.init(feature: GreetingFeature(), initialState: .init())
    }
}
