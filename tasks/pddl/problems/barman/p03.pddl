(define (problem barman-p03)
  (:domain barman)
  (:objects
    shaker1 - shaker
    left right - hand
    shot1 shot2 shot3 shot4 - shot
    ingredient1 ingredient2 ingredient3 - ingredient
    cocktail1 cocktail2 cocktail3 - cocktail
    dispenser1 dispenser2 dispenser3 - dispenser
    l0 l1 l2 - level
  )
  (:init
    (ontable shaker1)
    (clean shaker1)
    (empty shaker1)
    (ontable shot1)
    (clean shot1)
    (empty shot1)
    (ontable shot2)
    (clean shot2)
    (empty shot2)
    (ontable shot3)
    (clean shot3)
    (empty shot3)
    (ontable shot4)
    (clean shot4)
    (empty shot4)
    (handempty left)
    (handempty right)
    (dispenses dispenser1 ingredient1)
    (dispenses dispenser2 ingredient2)
    (dispenses dispenser3 ingredient3)
    (shaker-empty-level shaker1 l0)
    (shaker-level shaker1 l0)
    (next l0 l1)
    (next l1 l2)
    (cocktail-part1 cocktail1 ingredient3)
    (cocktail-part2 cocktail1 ingredient1)
    (cocktail-part1 cocktail2 ingredient3)
    (cocktail-part2 cocktail2 ingredient2)
    (cocktail-part1 cocktail3 ingredient2)
    (cocktail-part2 cocktail3 ingredient1)
  )
  (:goal (and
    (contains shot4 cocktail2)
  )))
